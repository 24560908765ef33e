"""The aggregate stage's one call: read every evaluation, write Tables 2 and 3 and their plots, return a summary."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiayn.io import atomic_write_json, atomic_write_text, read_lines
from aiayn.paper import paper_table3
from aiayn.report.collect import RunRecord, Seeds, collect_runs, row_settings, seeds_by_row
from aiayn.report.plots import plot_claims, plot_learning_curves
from aiayn.report.sweep import build_sweep, collect_points, write_sweep
from aiayn.report.table2 import P100_SUSTAINED_FLOPS, build_table2, write_table2
from aiayn.report.table3 import build_table3, write_table3
from aiayn.run import folders
from aiayn.run.curve import read_curve
from aiayn.verdicts.decide import PlanRecord
from aiayn.verdicts.significance import Design


def _kept_runs(records: Sequence[RunRecord], kept_root: Path | None) -> str | None:
    """ "base seeds 1, 2, 3 (kept/m30k_budget/multi30k-lc.norm.tok)" for the runs read from the kept seeds, None for
    none."""
    kept: dict[str, list[int]] = {}
    for r in records:
        if r.kept:
            kept.setdefault(r.row, []).append(r.seed)
    if not kept or kept_root is None:
        return None
    where = "/".join(Path(kept_root).parts[-3:])
    return "; ".join(f"{row} seed{'s' * (len(s) > 1)} {', '.join(map(str, s))}" for row, s in kept.items()) + (
        f" ({where}: committed seeds, trained and evaluated before)"
    )


def _mixed_runs(records: Sequence[RunRecord]) -> str:
    """ ", runs resumed on another float path, CPU or torch: base-s3" for the runs whose train.json says so
    (aiayn.run.floatpath.record_segment), "" for none."""
    mixed = [f"{r.row}-s{r.seed}" for r in records if r.train.get("mixed_float_paths")]
    return f", runs resumed on another float path, CPU or torch: {', '.join(mixed)}" if mixed else ""


def _distinct(records: Sequence[RunRecord], value: Callable[[RunRecord], Any], sep: str = ", ") -> str | None:
    """The distinct values of `value(run)` over the runs that have one, e.g. "tiny" or "tiny, small"."""
    return sep.join(sorted({str(v) for rec in records if (v := value(rec)) is not None})) or None


def _nested(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _data_name(rec: RunRecord) -> str | None:
    """The run's data, with its form where it is not the raw text: "multi30k (lc.norm.tok)"."""
    name, form = _nested(rec.config, "data", "name"), _nested(rec.config, "data", "form")
    return None if name is None else f"{name} ({form})" if form not in (None, "raw") else str(name)


def signatures(records: Sequence[RunRecord], section: str) -> str | None:
    """The distinct sacreBLEU signatures of one eval.json section ("dev", "test") over the runs ("; " between
    several)."""
    found = {str(sig) for r in records if (sig := (r.eval.get(section) or {}).get("sacrebleu_signature"))}
    return "; ".join(sorted(found)) or None


def mean_words(path: Path | None) -> float | None:
    """Average whitespace-separated words per line of a text file (None when it is absent or empty)."""
    if path is None or not Path(path).is_file():
        return None
    lines = read_lines(Path(path))
    return sum(len(line.split()) for line in lines) / len(lines) if lines else None


def sentence_lengths(refs: Mapping[str, Path]) -> tuple[float, float]:
    """Average (source, target) sentence lengths for counted attention FLOPs, from the test (else dev) files.

    Words, not subword tokens: attention products are a few percent of the total at these lengths, so the
    underestimate barely moves the count. The source side is the split's source file beside it when it exists.
    """
    split = "test" if refs.get("test") else "valid"
    tgt_file = refs.get(split)
    tgt = mean_words(tgt_file)
    src = mean_words(Path(tgt_file).with_name(folders.raw_file(split, "src"))) if tgt_file else None
    tgt = tgt or 1.0  # no reference text at all: count the matmuls at length 1 rather than fail
    return (src or tgt, tgt)


def describe_seeds(seeds: Mapping[str, Sequence[int]]) -> str:
    """ "1 2 3" when every row has the same seeds, else the seeds most rows have and each other row's."""
    lists = [tuple(s) for s in seeds.values()]
    if not lists:
        return ""
    common = max(set(lists), key=lists.count)
    others = [f"{row}: {' '.join(map(str, s))}" for row, s in seeds.items() if tuple(s) != common]
    return " ".join(map(str, common)) + (f" (but {'; '.join(others)})" if others else "")


def write_tables(
    runs_dir: Path,
    rows: Iterable[str],
    seeds: Seeds,
    refs: Mapping[str, Path],
    out_dir: Path,
    sustained_flops_per_device: float = P100_SUSTAINED_FLOPS,
    evals_dir: Path | None = None,
    variant: Mapping[str, Any] | None = None,
    design: Design = Design(),
    design_changed: Sequence[str] = (),
    kept_root: Path | None = None,
) -> dict[str, Any]:
    """Write table3.{md,csv,tex}, table2.{md,csv,tex}, sweep.{md,csv}, plan.json (Table 3's plan, typed), claims.png
    and learning_curves.png.

    `seeds` is one list for every row or each row's own (a row is compared with base on the seeds both have).
    refs maps a split ("valid", "test") to its reference file. Missing or failed runs are reported, never fatal.
    Evaluations are read from `evals_dir` (default: `runs_dir`). Tables 2 and 3 are of one `variant` (the rows
    themselves by default); the sweep table has every evaluated variant of the rows. `design` is how Table 3 decides its
    verdicts; `design_changed`, how it differs from its study's record (aiayn.verdicts.record), is said in the legend.
    Seeds evals/ lacks are read from `kept_root` where kept there (aiayn.run.kept); the legends name them.
    """
    rows, out_dir = list(rows), Path(out_dir)
    seeds = seeds_by_row(rows, seeds)
    records = collect_runs(Path(runs_dir), rows, seeds, evals_dir, variant, kept_root)
    ok = [r for r in records if r.ok]
    lengths = sentence_lengths(refs)
    context = dict(
        scale=_distinct(ok, lambda r: _nested(r.config, "scale", "name")),
        data=_distinct(ok, _data_name),
        # train.json's (aiayn.run.floatpath.described): runs on other float paths are not expected to agree digit for
        # digit
        float_path=((_distinct(ok, lambda r: r.train.get("float_path"), "; ") or "") + _mixed_runs(ok)) or None,
        dev_signature=signatures(ok, "dev"),
        test_signature=signatures(ok, "test"),
        seeds=describe_seeds(seeds),
        sustained_flops_per_device=sustained_flops_per_device,
        lengths=f"{lengths[0]:.1f}/{lengths[1]:.1f} words",
        design_changed=list(design_changed),
        kept=_kept_runs(records, kept_root),
    )
    table3 = build_table3(records, design)
    table2 = build_table2(records, lengths, sustained_flops_per_device)
    curves = {(r.row, r.seed): r.path / folders.CURVE for r in records if (r.path / folders.CURVE).is_file()}
    sweep, swept = build_sweep(collect_points(Path(evals_dir or runs_dir), rows))
    outputs = [
        *write_table3(table3, out_dir, context, design),
        *write_table2(table2, out_dir, context),
        *write_sweep(sweep, swept, out_dir),
        write_curves(curves, out_dir / "curves.csv"),
        atomic_write_json(out_dir / folders.PLAN, PlanRecord.of(table3).to_json()),
        plot_claims(table3, out_dir / "claims.png"),
        plot_learning_curves(curves, out_dir / "learning_curves.png", paper_perplexities(records, context)),
    ]
    return {
        "n_runs": len(records),
        "n_ok": len(ok),
        "n_per_row": {row: sum(r.ok for r in records if r.row == row) for row in rows},
        "failed": {f"{r.row}-s{r.seed}": r.reason for r in records if not r.ok},
        "context": context,
        "table3": table3,
        "table2": table2,
        "sweep": sweep,
        "outputs": [str(p) for p in outputs],
    }


PPL_MARKED = ("base", "big")  # the paper's rows whose dev perplexity the learning-curve plot marks


def paper_perplexities(records: Sequence[RunRecord], context: Mapping[str, Any]) -> dict[str, float]:
    """Row -> the paper's dev PPL, for the rows reproducing the paper's base and big, at the paper's scale only
    (elsewhere the absolute levels are not comparable)."""
    if context.get("scale") != "paper":
        return {}
    paper, out = paper_table3(), {}
    for rec in records:
        ref = (row_settings([rec]).get("paper") or {}).get("table3")
        if ref in PPL_MARKED and ref in paper:
            out[rec.row] = paper[ref]["ppl_dev"]
    return out


def write_curves(curves: Mapping[tuple[str, int], Path], path: Path) -> Path:
    """Every run's validation points in one long CSV (row, seed, run, step, val_loss, val_ppl) for `dvc plots`;
    `curves` maps (row, seed) to the run's curve file."""
    lines = ["row,seed,run,step,val_loss,val_ppl"]
    for (row, seed), csv_path in curves.items():
        curve = read_curve(csv_path)
        for step, loss, ppl in zip(curve["step"], curve.get("val_loss", []), curve.get("val_ppl", [])):
            if math.isfinite(ppl):
                lines.append(f"{row},{seed},{row}-s{seed},{int(step)},{loss:.6g},{ppl:.6g}")
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
