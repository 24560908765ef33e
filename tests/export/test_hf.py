"""--to hf: the exported MarianMTModel folder computes the smoke run's own function (logits, greedy tokens), its
tokenizer gives our ids, and what Marian cannot compute is refused."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tests.export.conftest import TOLERANCE, export_with_cli, random_batch, random_model

from aiayn.decode.search import pad_batch
from aiayn.export.cli import main
from aiayn.export.hf import marian_logits, to_marian
from aiayn.export.targets import relative_gap, unmappable
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

transformers = pytest.importorskip("transformers")


def teacher_forced(smoke_run, hf, rows: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Our logits and the MarianMTModel's on the dev set's references after their sources, and the non-pad mask."""
    tok = smoke_run.tokenizer
    src = pad_batch(smoke_run.source_ids[rows], tok.pad_id, "cpu")
    tgt = pad_batch([[tok.bos_id, *ids] for ids in tok.encode(smoke_run.references[rows])], tok.pad_id, "cpu")
    with torch.inference_mode():
        ours = smoke_run.model(src, tgt)
    return ours, marian_logits(hf, src, tgt, tok.pad_id), tgt != tok.pad_id


def test_the_smoke_run_translates_something(smoke_run):
    """Without varied outputs the greedy comparisons below would prove nothing."""
    assert all(smoke_run.greedy), "a dev sentence translated to nothing"
    assert len({tuple(ids) for ids in smoke_run.greedy}) >= 5
    assert any(len(ids) < limit for ids, limit in zip(smoke_run.greedy, smoke_run.limits)), "none stopped at EOS"


def test_teacher_forced_logits_equal_ours(smoke_run, hf_dir):
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    ours, theirs, real = teacher_forced(smoke_run, hf)
    gap = (ours - theirs).abs()[real].max() / ours[real].abs().max()
    assert gap <= TOLERANCE, f"relative logit gap {gap:.3g}"


def test_without_the_permutation_the_logits_differ_far_beyond_the_tolerance(smoke_run):
    """The negative control: the same weights copied as they are (interleaved sin/cos against Marian's halves)."""
    unpermuted = to_marian(smoke_run.model, permute=False)
    ours, theirs, real = teacher_forced(smoke_run, unpermuted, slice(0, 8))
    assert (ours - theirs).abs()[real].max() / ours[real].abs().max() > 1000 * TOLERANCE
    permuted = to_marian(smoke_run.model)
    ours, theirs, real = teacher_forced(smoke_run, permuted, slice(0, 8))
    assert (ours - theirs).abs()[real].max() / ours[real].abs().max() <= TOLERANCE


def test_greedy_outputs_are_ours_token_for_token(smoke_run, hf_dir):
    """generate(num_beams=1) on the dev set in one batch, up to the longest limit, each output then cut at its EOS
    and at its own limit (ours: `limit` tokens, then only EOS; greedy tokens before a step do not depend on later
    limits); and alone, for sentences that ran to their limit, with max_new_tokens = limit + 1: `limit` tokens and the
    EOS the exported generation config forces (forced_eos_token_id)."""
    hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    tok, ids, limits = smoke_run.tokenizer, smoke_run.source_ids, smoke_run.limits

    def generate(rows: list[int], max_new_tokens: int) -> list[list[int]]:
        src = pad_batch([ids[i] for i in rows], tok.pad_id, "cpu")
        with torch.inference_mode():
            out = hf.generate(
                input_ids=src,
                attention_mask=(src != tok.pad_id).long(),
                num_beams=1,
                do_sample=False,
                max_new_tokens=max_new_tokens,
            )
        assert (out[:, 0] == tok.bos_id).all()  # decoding starts from our BOS
        return out[:, 1:].tolist()

    def cut(row: list[int], limit: int) -> list[int]:
        return (row[: row.index(tok.eos_id)] if tok.eos_id in row else row)[:limit]

    batched = generate(list(range(len(ids))), max(limits) + 1)
    assert [cut(row, limit) for row, limit in zip(batched, limits)] == smoke_run.greedy
    at_limit = [i for i, out in enumerate(smoke_run.greedy) if len(out) == limits[i]][:3]
    assert at_limit, "no output ran to its limit"
    for i in at_limit:
        (row,) = generate([i], limits[i] + 1)
        assert row == smoke_run.greedy[i] + [tok.eos_id]


def test_the_tokenizer_gives_our_ids_and_decodes_back(smoke_run, hf_dir):
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    assert isinstance(hf_tok, transformers.MarianTokenizer)
    ours = smoke_run.tokenizer
    assert hf_tok(smoke_run.sources)["input_ids"] == smoke_run.source_ids  # raw text in, our ids and EOS out
    target_ids = [ids + [ours.eos_id] for ids in ours.encode(smoke_run.references)]
    assert hf_tok(text_target=smoke_run.references)["input_ids"] == target_ids
    decoded = hf_tok.batch_decode(target_ids, skip_special_tokens=True)
    assert decoded == ours.decode(target_ids) == smoke_run.references
    assert hf_tok.batch_decode(smoke_run.greedy, skip_special_tokens=True) == ours.decode(smoke_run.greedy)


def test_the_tokenizer_differs_only_where_docs_say(smoke_run, hf_dir):
    """docs/export.md: literal special pieces and a leading >>xx<< are read differently, an unknown token is dropped
    by decode(skip_special_tokens=True) where ours writes " ⁇ "; plain text, unknown characters included, is not."""
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    ours = smoke_run.tokenizer
    plain = "The theask will yoath, because 3 «thungs» — x2!"
    assert hf_tok(plain)["input_ids"] == ours.encode([plain])[0] + [ours.eos_id]
    assert hf_tok("a </s> b")["input_ids"] != ours.encode(["a </s> b"])[0] + [ours.eos_id]
    assert hf_tok(">>de<< " + plain)["input_ids"] == [ours.unk_id, *ours.encode([plain])[0], ours.eos_id]
    unknown = [ours.unk_id, *ours.encode(["The theask"])[0]]
    assert hf_tok.decode(unknown, skip_special_tokens=True) == "The theask"
    assert ours.decode([unknown])[0] == " ⁇  The theask"


def test_translation_as_the_pipeline_does_it_equals_our_greedy(smoke_run, hf_dir):
    """pipeline("translation", model=OUT) where this transformers has it; transformers 5 removed that task, and
    then its steps: the tokenizer on raw text, generate, batch_decode(skip_special_tokens=True)."""
    lines = [i for i, ids in enumerate(smoke_run.greedy) if len(ids) < smoke_run.limits[i]][:3]
    lines += [i for i in range(len(smoke_run.sources)) if i not in lines][: 5 - len(lines)]
    expected = smoke_run.tokenizer.decode([smoke_run.greedy[i] for i in lines])
    got = []
    try:
        translate = transformers.pipeline("translation", model=str(hf_dir))
    except KeyError as err:  # transformers >= 5
        assert "translation" in str(err)
        hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
        hf = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
        for i in lines:
            batch = hf_tok([smoke_run.sources[i]], return_tensors="pt")
            with torch.inference_mode():
                out = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=smoke_run.limits[i] + 1)
            got += hf_tok.batch_decode(out, skip_special_tokens=True)
    else:
        for i in lines:
            kwargs = dict(num_beams=1, do_sample=False, max_new_tokens=smoke_run.limits[i] + 1)
            got.append(translate(smoke_run.sources[i], **kwargs)[0]["translation_text"])
    assert got == expected


def test_the_folder_says_what_it_is(smoke_run, hf_dir):
    config = json.loads((hf_dir / "config.json").read_text())
    cfg = smoke_run.model.cfg
    assert config["model_type"] == "marian"
    assert (config["d_model"], config["encoder_layers"], config["decoder_ffn_dim"]) == (cfg.d_model, 3, cfg.d_ff)
    assert config["max_position_embeddings"] == cfg.max_positions and config["scale_embedding"] is True
    assert config["activation_function"] == "relu" and config["decoder_start_token_id"] == 2
    generation = json.loads((hf_dir / "generation_config.json").read_text())
    assert generation["num_beams"] == 4 and generation["bad_words_ids"] == [[0], [2]]
    card = (hf_dir / "README.md").read_text()
    assert str(smoke_run.run_dir) in card
    assert all(name in card for name in smoke_run.checkpoints)
    evaluation = json.loads(next((smoke_run.tmp / "evals").glob("base/**/eval.json")).read_text())
    assert f"sacreBLEU {evaluation['test']['bleu']:.2f}" in card and evaluation["test"]["sacrebleu_signature"] in card
    assert f"sacreBLEU {evaluation['dev']['bleu']:.2f}" in card
    assert "(the exported weights)" in card  # the test section averaged what was exported
    assert "departures.md" in card and "length^alpha" in card and "((5 + length) / 6)^alpha" in card


@pytest.mark.parametrize(
    "overrides",
    [
        dict(activation="gelu"),
        dict(share_embeddings="decoder"),
        dict(share_embeddings="none"),
        dict(d_model=18, n_heads=3, d_k=6, d_v=6),
    ],
    ids=["gelu", "share-decoder", "share-none", "9-frequencies"],
)
def test_other_mappable_settings_give_our_logits(overrides):
    """Random weights everywhere (biases and LayerNorms too): transformers' "gelu" is torch's erf GELU, ours too;
    untied embeddings map onto Marian's own; d_model=18 has an odd number of sinusoid frequencies."""
    model = random_model(**overrides)
    src, tgt = random_batch(40)
    with torch.inference_mode():
        ours = model(src, tgt)
    assert relative_gap(ours, marian_logits(to_marian(model), src, tgt, 0)) <= TOLERANCE
    assert relative_gap(ours, marian_logits(to_marian(model, permute=False), src, tgt, 0)) > 10 * TOLERANCE


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (dict(norm_position="pre"), "model.norm_position=pre"),
        (dict(pos_encoding="learned"), "model.pos_encoding=learned"),
        (dict(pos_encoding="rotary"), "model.pos_encoding=rotary"),
        (dict(pos_encoding="none"), "model.pos_encoding=none"),
        (dict(d_k=8), "model.d_k=8"),
        (dict(d_v=2), "model.d_v=2"),
    ],
)
def test_what_marian_cannot_compute_is_refused_naming_the_setting(overrides, key):
    cfg = ModelConfig(**(dict(n_layers=1, d_model=16, d_ff=24, n_heads=4, d_k=4, d_v=4) | overrides))
    assert any(problem.startswith(key) for problem in unmappable(cfg, "hf"))
    with pytest.raises(ValueError, match=key):
        to_marian(Transformer(cfg, 40, 0))


def test_the_command_refuses_a_pre_ln_run_and_an_existing_folder(smoke_run, tmp_path, capsys):
    """The recorded config is checked before the weights are loaded; nothing is written."""
    run = tmp_path / "run"
    shutil.copytree(smoke_run.run_dir, run)
    config = run / "config.yaml"
    text = config.read_text()
    assert "norm_position: post" in text
    config.write_text(text.replace("norm_position: post", "norm_position: pre"))
    assert main([str(run), str(tmp_path / "out"), "--to", "hf"]) == 2
    assert "model.norm_position=pre" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main([str(smoke_run.run_dir), str(tmp_path / "full"), "--to", "hf"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


def test_the_export_prints_no_progress_bars(smoke_run, capfd):
    """What the command prints is what it wrote and checked: transformers' weight-loading bars are off."""
    pytest.importorskip("transformers")
    export_with_cli(smoke_run, "hf-quiet", "--to", "hf")
    out, err = capfd.readouterr()
    assert "%|" not in out + err, err
