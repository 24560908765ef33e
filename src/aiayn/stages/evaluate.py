"""The evaluate stage: decode dev and test, score, write eval.json beside a copy of the run's own small files.

Dev (newstest2013 for WMT), from the last checkpoint (the average of the last row.dev_average_last at the tiny
scale), gives Table 3's BLEU and PPL; test (newstest2014), from the average of the row's last checkpoints, gives
Table 2's BLEU.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch

from aiayn.checkpoint.averaging import select_last
from aiayn.config.schema import Config
from aiayn.data.batching import eval_batches
from aiayn.data.tokenizer import Tokenizer
from aiayn.decode.search import autocast, output_limits
from aiayn.decode.step import Models, members
from aiayn.eval.bleu import sacre_bleu
from aiayn.eval.perplexity import dev_perplexity
from aiayn.eval.runaways import at_length_limit, runaway_summary
from aiayn.eval.scoring import score_translations
from aiayn.inference.trained import Decoding, decode_device, decode_precision, load_weights, run_tokenizer
from aiayn.io import atomic_write_json, atomic_write_text, read_json, read_lines
from aiayn.model.transformer import Transformer
from aiayn.run import floatpath, folders, kept, tracking
from aiayn.run.folders import RunSpec

log = logging.getLogger(__name__)


def decode_split(
    cfg: Config, model: Models, tokenizer, split: str, device
) -> tuple[list[str], list[str], float, list[str], list[bool]]:
    """Translate `data/raw/{split}.src` (aiayn.inference.trained.Decoding) with a model or an ensemble; return
    hypotheses, references, sentences per second, the sources and which hypotheses ran to the search's length
    limit."""
    raw = Path(cfg.paths.raw)
    sources, refs = read_lines(raw / folders.raw_file(split, "src")), read_lines(raw / folders.raw_file(split, "tgt"))
    start = time.perf_counter()
    outputs = Decoding.of(cfg, device).search(model, tokenizer, sources, f"decode {split}")
    hyps = tokenizer.decode(outputs)
    speed = len(sources) / max(time.perf_counter() - start, 1e-9)
    lengths = [len(ids) for ids in tokenizer.encode(sources)]
    limits = output_limits(lengths, cfg.decode.max_len_b, min(m.cfg.max_positions for m in members(model)))
    return hyps, refs, speed, sources, at_length_limit(outputs, limits)


# eval.json's sections, each one evaluation protocol with its own checkpoints: dev is Table 3's (row.dev_average_last:
# the last checkpoint, section 6.2's "no checkpoint averaging", but at the tiny scale), test Table 2's (the row's
# average_last, section 6.1: base 5, big 20).
SECTIONS = (("dev", "valid"), ("test", "test"))


def protocol(cfg: Config, section: str) -> int:
    """How many of the run's last checkpoints a section's evaluation averages (1: the last alone): row.average_last
    for test, row.dev_average_last for dev (docs/departures.md#dev-averaging)."""
    return max(1, int(cfg.row.average_last if section == "test" else cfg.row.dev_average_last))


def evaluate(cfg: Config) -> dict[str, Any]:
    """Score a run (aiayn.run.folders: runs/{row}/{variant}/seed{seed}) into its evaluation folder: eval.json (a `dev`
    section, and a `test` section for a row in Table 2: `table2` in `row.tables`) and each decoded split's
    hypotheses. A section whose checkpoints are the same as the one before reuses its model."""
    tracking.refuse_secrets(cfg)
    spec, bpe_dir = RunSpec.of(cfg), Path(cfg.paths.bpe)
    kept_folder = kept.kept_instead(cfg)
    if kept_folder is not None:
        log.info("%s: kept in %s; the aggregate stage reads it there", spec.name("eval"), kept_folder)
        spec.eval_dir.parent.mkdir(parents=True, exist_ok=True)  # the row's folder, DVC's output, when all are kept
        return read_json(kept_folder / folders.EVAL)
    float_path = floatpath.pin_stage(cfg.trainer, decode_precision(cfg))
    spec.eval_dir.mkdir(parents=True, exist_ok=True)
    device, tokenizer = decode_device(cfg), run_tokenizer(bpe_dir, select_last(spec.checkpoints, 1)[-1])
    sections = SECTIONS if "table2" in cfg.row.tables else SECTIONS[:1]
    wandb_run = tracking.start_run(cfg, job_type="eval")
    tracking.use_inputs(wandb_run, [tracking.checkpoint_artifact(cfg)])
    try:
        result: dict[str, Any] = {
            "variant": dict(cfg.variant),
            "run": str(spec.run_dir),
            "beam_size": cfg.decode.beam_size if cfg.decode.strategy == "beam" else 1,
            "length_penalty": cfg.decode.length_penalty,
            "length_norm": cfg.decode.length_norm,
            "strategy": cfg.decode.strategy,
            "precision": decode_precision(cfg),
            "float_path": float_path,
        }
        model: Transformer | None = None
        paths: list[Path] = []
        for section, split in sections:
            wanted = select_last(spec.checkpoints, protocol(cfg, section))
            if model is None or wanted != paths:  # the same checkpoints are one model, loaded once
                model = None  # one model in memory at a time
                model, paths = load_weights(wanted, device), wanted
            result[section] = _evaluate_split(cfg, spec, model, tokenizer, split, device, paths, wandb_run)
            if section == "dev":
                batches = eval_batches(bpe_dir, "valid", tokenizer, cfg.train.max_tokens)
                with autocast(result["precision"], device):
                    result[section]["ppl"] = dev_perplexity(model, _to(batches, device), tokenizer.pad_id)
        carry_run_files(spec)
        atomic_write_json(spec.eval_dir / folders.EVAL, result)
        log.info(
            "%s: %s",
            spec.eval_dir,
            "; ".join(
                f"{section} BLEU {result[section]['bleu']:.2f}"
                + (f", PPL {result[section]['ppl']:.4g}" if "ppl" in result[section] else "")
                + f" ({result[section]['n_sentences']} sentences, {result[section]['sentences_per_s']:.0f}/s)"
                for section, split in sections
            ),
        )
        tracking.safe_log(
            wandb_run,
            {
                f"{section}/{k}": v
                for section, _ in sections
                for k, v in result[section].items()
                if isinstance(v, (int, float))
            },
        )
        tracking.log_output(wandb_run, tracking.eval_artifact(spec))
    finally:
        tracking.finish(wandb_run)
    return result


def _evaluate_split(
    cfg: Config,
    spec: RunSpec,
    model: Transformer,
    tokenizer: Tokenizer,
    split: str,
    device: torch.device,
    paths: list[Path],
    wandb_run,
) -> dict[str, Any]:
    """Decode and score one split with the given weights; write its hypotheses; its section of eval.json."""
    hyps, refs, speed, sources, limited = decode_split(cfg, model, tokenizer, split, device)
    atomic_write_text(spec.eval_dir / folders.hyps_file(split), "".join(h + "\n" for h in hyps))
    # The bootstrap interval is Table 2's (a test set, one system); Table 3 compares rows over seeds.
    tokenized = cfg.data.form == "lc.norm.tok"
    scores = score_translations(
        hyps,
        refs,
        tgt_lang=cfg.data.tgt_lang,
        bootstrap=cfg.decode.bootstrap if split == "test" else 0,
        seed=cfg.seed,
        tokenized=tokenized,
    )
    _log_samples(wandb_run, sources, refs, hyps, cfg.decode.samples, split)
    return {
        "checkpoints_averaged": len(paths),
        "checkpoints": [p.name for p in paths],
        **scores,
        "sentences_per_s": round(speed, 3),
        # The trivial baseline: the source sentence copied unchanged, scored the same way.
        "copy_baseline_bleu": sacre_bleu(sources, refs, tokenized)[0],
        "runaways": runaway_summary(hyps, refs, limited, tokenized),
        "set": _set_name(cfg, split, len(refs)),
    }


def carry_run_files(spec: RunSpec) -> None:
    """Copy the run's config, summary and curve (folders.run_files) into its evaluation folder, so that the
    aggregate stage reads what this stage wrote and never the run folder, whose checkpoints it need not depend on."""
    for name in folders.run_files():
        if (spec.run_dir / name).is_file():
            atomic_write_text(spec.eval_dir / name, (spec.run_dir / name).read_text(encoding="utf-8"))


def _to(loader, device):
    for batch in loader:
        yield {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _set_name(cfg: Config, split: str, lines: int) -> dict[str, Any]:
    """Which set was scored, from the fetch stage's stats.json (e.g. newstest2014-full), and its lines."""
    stats_path = Path(cfg.paths.raw) / folders.DATA_STATS
    stats = read_json(stats_path) if stats_path.exists() else {}
    return {"name": stats.get(f"{split}_set", f"{cfg.data.name}/{split}"), "lines": lines}


def _log_samples(run, sources: list[str], refs: list[str], hyps: list[str], n: int, split: str) -> None:
    if run is None or n <= 0:
        return
    try:
        import wandb

        table = wandb.Table(
            columns=["source", "reference", "hypothesis"],
            data=[[s, r, h] for s, r, h in list(zip(sources, refs, hyps))[:n]],
        )
        run.log({f"{'dev' if split == 'valid' else split}/samples": table})
    except Exception as err:  # browsing aid only
        log.warning("could not log sample translations to wandb: %s", err)
