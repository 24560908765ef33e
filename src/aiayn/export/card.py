"""The model card (README.md) written beside an exported model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.config.schema import DecodeConfig
from aiayn.model.config import ModelConfig
from aiayn.run import folders

if TYPE_CHECKING:
    from aiayn.config.schema import Config

# The sections of docs/departures.md, in its order: shipped with the package, which reads nothing from a checkout
# (tests/export/test_card.py checks them against the document).
DEPARTURES = (
    "synthetic-corpus",
    "sentencepiece-bpe",
    "token-budget",
    "corpus-cleaning",
    "sgm-entities",
    "corpus-cleaning-counts",
    "wmt14-en-fr-size",
    "wmt14-dev-archive",
    "initialisation",
    "learned-positions",
    "parameter-counts",
    "loss-normalisation",
    "label-smoothing-variant",
    "small-scales",
    "m30k-tiny",
    "budgeted-schedule",
    "decode-special-tokens",
    "decode-length-penalty",
    "decode-max-length",
    "decode-early-stop",
    "eval-paper-bleu-tokenizer",
    "table3-dev-sacrebleu",
    "dev-averaging",
    "attention-biases",
    "decode-tuning",
)

PAPER = DecodeConfig()  # section 6.1's decoding: what a run's config gives when it names none


def find_evaluation(run_cfg: Config) -> Path | None:
    """The evaluate stage's eval.json of the run `run_cfg` (its config.yaml) describes, where it exists
    (aiayn.run.folders.RunSpec.eval_dir, relative paths from the working folder)."""
    try:
        path = folders.RunSpec.of(run_cfg).eval_dir / folders.EVAL
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return path if path.is_file() else None


def _section(name: str, section: dict[str, Any], exported: list[str]) -> str:
    same = "the exported weights" if list(section.get("checkpoints", [])) == exported else "other weights than these"
    ckpts = ", ".join(section.get("checkpoints", [])) or "?"
    text = f"- {name}: sacreBLEU {section.get('bleu', float('nan')):.2f} (`{section.get('sacrebleu_signature', '?')}`)"
    if "bleu_paper" in section:
        text += f", tokenized BLEU (the paper's) {section['bleu_paper']:.2f}"
    if "ppl" in section:
        text += f", PPL {section['ppl']:.4g}"
    name_of_set = section.get("set", {}).get("name", "?")
    return text + f"; {section.get('n_sentences', '?')} sentences of {name_of_set}; weights: mean of {ckpts} ({same})"


def model_card(
    cfg: ModelConfig,
    *,
    target: str,
    probe_gap: float,
    run: str = "?",
    row: str = "?",
    seed: Any = "?",
    variant: dict[str, Any] | None = None,
    checkpoints: Sequence[str] = (),
    evaluation: dict[str, Any] | None = None,
    evaluation_path: str | None = None,
    src_lang: str = "en",
    tgt_lang: str = "de",
    decode: dict[str, Any] | None = None,
    quantization: str | None = None,
) -> str:
    """README.md of an exported model: the run, the checkpoints averaged, its evaluation where one exists, what is
    exact and what differs, and how to use it."""
    decode = decode or {}
    beam, alpha = decode.get("beam_size", PAPER.beam_size), decode.get("length_penalty", PAPER.length_penalty)
    power = decode.get("length_norm", PAPER.length_norm) == "power"  # the run scores as transformers and CTranslate2 do
    max_len_b = decode.get("max_len_b", PAPER.max_len_b)
    variant_text = ", ".join(f"{k}={v}" for k, v in (variant or {}).items()) or "none (the row as it is)"
    lines = [
        "---",
        f"language: [{src_lang}, {tgt_lang}]",
        "library_name: transformers" if target == "hf" else "library_name: ctranslate2",
        "tags: [translation, transformer, aiayn]",
        "pipeline_tag: translation",
        "---",
        "",
        f"# aiayn `{row}` seed {seed}: {src_lang}→{tgt_lang} Transformer (Vaswani et al. 2017 reproduction)",
        "",
        f"Exported by `aiayn-export --to {target}` from the run `{run}` (row `{row}`, seed {seed}, "
        f"variant: {variant_text}).",
        "",
        f"Weights: the mean of {len(checkpoints)} checkpoint(s): {', '.join(checkpoints) or '?'}.",
        "",
        f"Model: {cfg.n_layers} + {cfg.n_layers} layers, d_model {cfg.d_model}, d_ff {cfg.d_ff}, {cfg.n_heads} heads, "
        f"{cfg.activation}, {cfg.norm_position}-LN, {cfg.pos_encoding} positions, embeddings shared: "
        f"{cfg.share_embeddings}, at most {cfg.max_positions} positions.",
        "",
        "## Evaluation",
        "",
    ]
    if evaluation:
        lines.append(
            f"From the evaluate stage's `{evaluation_path}` (our beam search: {evaluation.get('strategy')} "
            f"{evaluation.get('beam_size')}, alpha {evaluation.get('length_penalty')}, length norm "
            f"{evaluation.get('length_norm', 'gnmt')}, "
            f"{evaluation.get('precision')}):"
        )
        lines.append("")
        for key, name in (("dev", "dev"), ("test", "test")):
            if isinstance(evaluation.get(key), dict):
                lines.append(_section(name, evaluation[key], list(checkpoints)))
        differs = _decoding_differs(evaluation, decode)
        if differs:
            lines += [
                "",
                f"These scores were decoded with other settings than the run's ({differs}), which the generation "
                "defaults below take: pass the evaluation's to reproduce them.",
            ]
    else:
        lines.append(
            "No evaluation of this run was found (run the evaluate stage: `dvc repro` or "
            "`python pipeline/evaluate.py` with its row and seed)."
        )
    lines += [
        "",
        "## What is exact, what differs",
        "",
        "The model departs from the paper as the project's `docs/departures.md` lists" + f" ({', '.join(DEPARTURES)}).",
        "",
    ]
    if target == "hf":
        lines += [
            "This MarianMTModel computes the run's own function: its weights are ours with the model axis permuted "
            "(our interleaved sin/cos position columns become Marian's [sin | cos] halves), which LayerNorm and the "
            f"residual stream commute with. Teacher-forced logits matched ours to {probe_gap:.2g} (relative, float32) "
            "when this was written; the project's tests (tests/export) check that greedy search gives our greedy "
            "search's tokens.",
            "",
            "- Tokenizer: a MarianTokenizer over the run's sentencepiece model; ids are ours, EOS is appended to the "
            "source as ours. It differs from ours only on text containing the literal special pieces (`</s>`, "
            "`<unk>`, `<pad>`, read as those tokens), on a line starting with `>>xx<<` (Marian's language code: "
            "one `<unk>` token here), and on an empty line (ours translates it to an empty line without decoding). "
            "`decode(..., skip_special_tokens=True)` drops `<unk>`, which ours writes as ` ⁇ `.",
            (
                "- Beam search: transformers scores a hypothesis by log P / length^alpha, as this run does "
                "(decode.length_norm=power), but stops by its own rule, so beam outputs can differ."
                if power
                else "- Beam search: transformers scores a hypothesis by log P / length^alpha; ours by GNMT's "
                "log P / ((5 + length) / 6)^alpha (docs/departures.md#decode-length-penalty), with its own early "
                "stop, so beam outputs can differ."
            )
            + f" The generation defaults here are the run's beam {beam} and alpha {alpha}.",
            f"- Length: ours allows source length (its EOS counted) + {max_len_b} tokens per sentence; transformers "
            f"has no per-sentence limit: `max_length` here is the decoder's positions ({cfg.max_positions} tokens "
            "with EOS), or pass `max_new_tokens`. At the limit transformers forces EOS with score 0, ours keeps "
            "EOS's log-probability.",
            "- PAD and BOS are never generated (`bad_words_ids`), as ours.",
            "- transformers 5 removed the `translation` pipeline; tokenizer + `generate` + `batch_decode` is what it "
            "did.",
            "",
            "## Use",
            "",
            "```python",
            "from transformers import AutoTokenizer, MarianMTModel",
            "",
            'tokenizer = AutoTokenizer.from_pretrained("THIS_FOLDER")',
            'model = MarianMTModel.from_pretrained("THIS_FOLDER")',
            'batch = tokenizer(["A sentence."], return_tensors="pt", padding=True, truncation=True)',
            "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
            "```",
        ]
    else:
        lines += [
            "This CTranslate2 model computes the run's own function: our position table is given explicitly, "
            "decoding starts from our BOS `<s>`, sources get our EOS `</s>` appended "
            f"(`add_source_eos`). Float32 log-probabilities matched ours to {probe_gap:.2g} when this was written; "
            "the project's tests (tests/export) check that greedy search gives our greedy search's tokens."
            + (f" The weights here are quantized ({quantization}): close to ours, not equal." if quantization else ""),
            "",
            (
                "- Beam search: CTranslate2 normalises by length^length_penalty, as this run does "
                "(decode.length_norm=power), but stops by its own rule, so beam outputs can differ "
                if power
                else "- Beam search: CTranslate2 normalises by length^length_penalty; ours by GNMT's "
                "((5 + length) / 6)^alpha, with its own early stop, so beam outputs can differ "
            )
            + f"(ours: beam {beam}, alpha {alpha}).",
            f"- Length: ours allows source length (its EOS counted) + {max_len_b} tokens per sentence, then only "
            "EOS: give that as `max_decoding_length` (CTranslate2 counts the tokens before EOS). A source longer "
            "than max_positions - 1 pieces must be cut by the caller (ours keeps its first max_positions - 1).",
            '- Pass `suppress_sequences=[["<pad>"], ["<s>"]]`: ours never generates PAD or BOS.',
            "",
            "## Use",
            "",
            "```python",
            "import ctranslate2, sentencepiece",
            "",
            f'sp = sentencepiece.SentencePieceProcessor(model_file="THIS_FOLDER/{folders.TOKENIZER}")',
            'translator = ctranslate2.Translator("THIS_FOLDER")',
            'pieces = sp.encode(["A sentence."], out_type=str)',
            f"result = translator.translate_batch(pieces, beam_size={beam}, "
            + (f"length_penalty={alpha}, " if power else "")
            + 'suppress_sequences=[["<pad>"], ["<s>"]])',
            "print(sp.decode([r.hypotheses[0] for r in result]))",
            "```",
        ]
    return "\n".join(lines) + "\n"


def _decoding_differs(evaluation: dict[str, Any], decode: dict[str, Any]) -> str:
    """ "beam 5 against 4, ..." for the beam settings in which the evaluation differs from the run's decode config
    (an evaluation run with overrides); "" when they agree or either side does not say."""
    names = {"beam_size": "beam", "length_penalty": "alpha", "length_norm": "length norm"}
    parts = []
    for key, name in names.items():
        paper = getattr(PAPER, key)
        ours = evaluation.get(key, paper if key == "length_norm" else None)  # older eval.json: no length_norm
        if ours is not None and ours != decode.get(key, paper):
            parts.append(f"{name} {ours} against {decode.get(key, paper)}")
    return ", ".join(parts)
