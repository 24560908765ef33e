"""Choosing beam size and length penalty on the dev set (section 6.1: "chosen after experimentation on the
development set").

Each sweep job decodes the dev split only, never test (choosing on test would report a tuned, optimistic test
score), and writes `beam{b}-lp{a}.json` into the run's tuning folder (aiayn.run.folders:
decode_tuning/{row}/seed{seed}/, outside the DVC outputs, so tuning never makes a stage look changed). Every job then
re-chooses from all the files in that folder, so `chosen.json`, `table.md` and `decode/tuned.yaml` are complete after
the last job of a sweep, whatever Hydra launcher ran it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from aiayn.config.schema import Config, ConfigError, DecodeConfig
from aiayn.eval.scoring import score_translations
from aiayn.inference.trained import decode_device, load_model, run_tokenizer
from aiayn.io import atomic_write_json, atomic_write_text, read_json
from aiayn.run.folders import RunSpec
from aiayn.stages.evaluate import decode_split

log = logging.getLogger(__name__)

PAPER_ALPHA = DecodeConfig().length_penalty  # 0.6, section 6.1: ties go to the alpha nearest the paper's
PAPER_NORM = DecodeConfig().length_norm  # "gnmt", section 6.1
REQUIRED = ("beam_size", "length_penalty", "dev_bleu", "dev_chrf", "dev_sentences_per_s", "context")


def setting_name(beam_size: int, length_penalty: float, length_norm: str = PAPER_NORM) -> str:
    """File stem of one setting, e.g. beam4-lp0.6, or beam5-lp1.0-power for decode.length_norm=power."""
    norm = "" if length_norm == PAPER_NORM else f"-{length_norm}"
    return f"beam{int(beam_size)}-lp{float(length_penalty)!r}{norm}"


def norm_of(result: dict[str, Any]) -> str:
    """A setting's decode.length_norm (results written before the key existed used the paper's)."""
    return str(result.get("length_norm", PAPER_NORM))


def decoding_context(ckpt_paths: Sequence[Path], max_len_b: int, dev_lines: int) -> dict[str, Any]:
    """What must be equal for two settings' scores to be comparable: the same weights, length limit and dev set."""
    ckpts = [{"name": p.name, "size": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns} for p in ckpt_paths]
    return {"checkpoints": ckpts, "max_len_b": max_len_b, "dev_lines": dev_lines}


def tune_decode(cfg: Config) -> dict[str, Any]:
    """Decode the dev split with cfg.decode's beam size, alpha and length norm, write its scores, then re-choose
    the best."""
    if cfg.decode.strategy != "beam":
        raise ConfigError(f"decode.strategy={cfg.decode.strategy!r}: tuning sweeps beam search; use decode=paper")
    spec = RunSpec.of(cfg)
    out_dir = spec.tuning_dir
    device = decode_device(cfg)
    # Loading is not cached across sweep jobs: averaging even 20 checkpoints costs seconds, decoding the dev set
    # with a beam costs minutes, and a cache would be global state.
    model, paths = load_model(spec.checkpoints, cfg.row.average_last, device)
    tokenizer = run_tokenizer(Path(cfg.paths.bpe), paths[-1])
    hyps, refs, speed, _, _ = decode_split(cfg, model, tokenizer, "valid", device)
    scores = score_translations(
        hyps, refs, tgt_lang=cfg.data.tgt_lang, bootstrap=0, tokenized=cfg.data.form == "lc.norm.tok"
    )
    result = {
        "beam_size": cfg.decode.beam_size,
        "length_penalty": cfg.decode.length_penalty,
        "length_norm": cfg.decode.length_norm,
        "dev_bleu": scores["bleu"],
        "dev_bleu_paper": scores["bleu_paper"],
        "dev_chrf": scores["chrf"],
        "dev_sentences_per_s": round(speed, 3),
        "sacrebleu_signature": scores["sacrebleu_signature"],
        "context": decoding_context(paths, cfg.decode.max_len_b, len(refs)),
    }
    name = setting_name(result["beam_size"], result["length_penalty"], result["length_norm"])
    atomic_write_text(out_dir / f"{name}.hyps.txt", "".join(h + "\n" for h in hyps))
    atomic_write_json(out_dir / f"{name}.json", result)
    prune_stale(out_dir, result["context"])
    chosen = write_choice(out_dir)
    log.info("%s: dev BLEU %.2f; best so far %s", name, result["dev_bleu"], chosen["setting"])
    return {**result, "tuning_dir": str(out_dir), "chosen": chosen["setting"]}


def prune_stale(out_dir: Path, context: dict) -> None:
    """Remove settings scored with other weights, length limit or dev set: they cannot be compared with these."""
    for path in sorted(out_dir.glob("beam*-lp*.json")):
        if read_json(path).get("context") != context:
            log.warning("%s: scored with other checkpoints or settings; removing it", path)
            path.unlink(missing_ok=True)
            path.with_name(path.stem + ".hyps.txt").unlink(missing_ok=True)


def read_results(out_dir: Path | str) -> list[dict[str, Any]]:
    """Every setting's scores in `out_dir`, checked for the keys the chooser needs and for one shared context."""
    out_dir = Path(out_dir)
    results = []
    for path in sorted(out_dir.glob("beam*-lp*.json")):
        result = read_json(path)
        missing = [key for key in REQUIRED if key not in result]
        if missing:
            raise ValueError(f"{path}: missing keys {missing}")
        results.append({**result, "file": path.name})
    if not results:
        raise FileNotFoundError(f"{out_dir}: no beam*-lp*.json results to choose from")
    odd = [r["file"] for r in results if r["context"] != results[0]["context"]]
    if odd:
        raise ValueError(
            f"{out_dir}: {odd} were decoded with other checkpoints, max_len_b or dev set than "
            f"{results[0]['file']}; delete the stale files and rerun the sweep"
        )
    return results


def rank_key(result: dict[str, Any]) -> tuple:
    """Best first: highest dev BLEU; ties go to the smaller beam (faster), then the paper's length norm, then alpha
    nearer the paper's 0.6."""
    # Departure: see docs/departures.md#decode-tuning (the paper names neither its grid nor its dev metric).
    alpha = result["length_penalty"]
    return -result["dev_bleu"], result["beam_size"], norm_of(result) != PAPER_NORM, abs(alpha - PAPER_ALPHA), alpha


def choose(results: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The best setting and all settings ranked, by `rank_key`."""
    if not results:
        raise ValueError("choose needs at least one result")
    ranked = sorted(results, key=rank_key)
    return ranked[0], ranked


def write_choice(out_dir: Path | str) -> dict[str, Any]:
    """Write chosen.json, table.md and decode/tuned.yaml from the results in `out_dir`; return chosen.json's dict.

    Rewritten until the folder holds no result it did not see, so concurrent jobs converge on all results.
    """
    out_dir = Path(out_dir)
    results = read_results(out_dir)
    while True:
        chosen = _write_choice_once(out_dir, results)
        again = read_results(out_dir)
        if again == results:
            return chosen
        results = again


def _write_choice_once(out_dir: Path, results: list[dict[str, Any]]) -> dict[str, Any]:
    best, ranked = choose(results)
    ranked = [{**r, "length_norm": norm_of(r)} for r in ranked]
    best = ranked[0]
    columns = ("beam_size", "length_penalty", "length_norm", "dev_bleu", "dev_chrf", "dev_sentences_per_s")
    chosen = {
        "setting": setting_name(best["beam_size"], best["length_penalty"], best["length_norm"]),
        "beam_size": best["beam_size"],
        "length_penalty": best["length_penalty"],
        "length_norm": best["length_norm"],
        "dev_bleu": best["dev_bleu"],
        "dev_chrf": best["dev_chrf"],
        "criterion": "max dev BLEU (sacreBLEU, valid split); ties: smaller beam, then the paper's length norm, "
        "then alpha nearer 0.6",
        "overrides": [
            f"decode.beam_size={best['beam_size']}",
            f"decode.length_penalty={best['length_penalty']}",
            f"decode.length_norm={best['length_norm']}",
        ],
        "settings": [{key: r[key] for key in columns} for r in ranked],
        "context": best["context"],
    }
    atomic_write_json(out_dir / "chosen.json", chosen)
    atomic_write_text(out_dir / "table.md", _table(ranked, columns))
    tuned = {
        "strategy": "beam",
        "beam_size": best["beam_size"],
        "length_penalty": best["length_penalty"],
        "length_norm": best["length_norm"],
        "max_len_b": best["context"]["max_len_b"],
    }
    header = (
        f"# Chosen on the dev set by pipeline/tune_decode.py ({chosen['criterion']}).\n"
        f"# Use: --config-dir {out_dir} decode=tuned\n"
    )
    atomic_write_text(out_dir / "decode" / "tuned.yaml", header + OmegaConf.to_yaml(OmegaConf.create(tuned)))
    return chosen


def _table(ranked: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """A Markdown table of every setting, best first; the chosen one is marked."""
    lines = ["| " + " | ".join(columns) + " | chosen |", "|" + "---|" * (len(columns) + 1)]
    for i, r in enumerate(ranked):
        cells = (f"{r[c]:g}" if isinstance(r[c], (int, float)) else str(r[c]) for c in columns)
        lines.append("| " + " | ".join(cells) + f" | {'*' if i == 0 else ''} |")
    return "\n".join(lines) + "\n"
