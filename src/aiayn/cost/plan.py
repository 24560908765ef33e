"""What a configured pipeline will cost before anything is launched: counted FLOPs and device-hours per row.

    aiayn-plan                                  # params.yaml as dvc repro would run it
    aiayn-plan -S scale=paper -S data=wmt14_en_de --device H200
    aiayn-plan -S scale=paper -S 'rows=[base,big]' -S train.max_steps=50000 --device A100

For every row and its seeds: training FLOPs (aiayn.cost.flops: 3 x forward, at the scale's steps and batch, attention at
the corpus's average sentence lengths) and decoding FLOPs (beam search over dev, and test for Table 2 rows), then
hours on the device from the measured speed per device and model size in src/aiayn/cost/devices.yaml (which
gpu/gpu_check.sh updates on a GPU; an unmeasured entry is printed as an estimate). Counted FLOPs are exact
for the configured shapes; hours are as good as the speed entry behind them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aiayn.config.params import Params
from aiayn.cost.devices import load as device_table
from aiayn.cost.flops import model_flops_per_token, peak_flops, training_flops
from aiayn.model.config import ModelConfig
from aiayn.run import folders

# Average subword tokens per sentence (source, target) and dev/test sizes when the corpus is not yet fetched:
# WMT14 from its BPE at 37k (~27 per sentence, an estimate), Multi30k captions (measured at 10k: 14.9/14.1), the
# synthetic corpus at the tiny default's 800 pieces (measured: 7.3/6.3, dev and test 1,000 pairs each).
CORPORA = {
    "wmt14_en_de": dict(lengths=(27.0, 28.0), dev=3000, test=3003),
    "wmt14_en_fr": dict(lengths=(29.0, 32.0), dev=3000, test=3003),
    "multi30k": dict(lengths=(14.0, 15.0), dev=1014, test=1000),
    "local": dict(lengths=(14.0, 15.0), dev=1014, test=1000),
    "synthetic": dict(lengths=(7.3, 6.3), dev=1000, test=1000),
}


@functools.cache
def anchors() -> dict[str, ModelConfig]:
    """The sizes devices.yaml's MFUs were measured at: Table 3's base (the model schema's defaults) and big
    (conf/row/big.yaml at the paper's scale)."""
    from aiayn.config.composition import compose
    from aiayn.config.resolve import prepare

    return {"base": ModelConfig(), "big": prepare(compose(["scale=paper", "row=big"])).model}


def corpus(data: str, vocab: int, bpe_dir: Path) -> dict[str, Any]:
    """Average lengths and dev/test sizes: measured from data/bpe/stats.json when the bpe stage has run on this
    corpus and vocabulary, else the estimates above."""
    stats, raw = _read(Path(bpe_dir) / folders.DATA_STATS), _read(Path(bpe_dir).parent / "raw" / folders.DATA_STATS)
    if raw.get("source") == data and stats.get("vocab_size") == vocab:
        splits = stats["splits"]
        train = splits["train"]
        return dict(
            lengths=(train["src_tokens"] / train["n"], train["tgt_tokens"] / train["n"]),
            dev=splits["valid"]["n"],
            test=splits["test"]["n"],
            measured=True,
        )
    return {**CORPORA.get(data, CORPORA["local"]), "measured": False}


def _read(path: Path) -> dict[str, Any]:
    """A stage's stats.json, or {} when that stage has not run."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@dataclass
class Speed:
    """A device's counted-FLOP rate for one model (FLOP/s), for training and decoding, whether measured, and whether
    only an upper bound on the rate (a lower bound on the time)."""

    train: float
    decode: float
    measured: bool
    source: str
    lower_bound: bool = False


def speed(
    device: str,
    model: ModelConfig,
    vocab: int,
    lengths: tuple[float, float],
    table: dict[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Speed:
    """The rate for `model` on `device`: the MFU measured at base and big, log-interpolated between them by FLOPs
    per token, times the dense peak; CPU: its sustained rate measured at a few shapes (`points`), interpolated the
    same way. A point with `when` (dotted keys and values, such as trainer.threads: 2) was measured with those
    settings: where `settings` (the run's, flattened) has them all, only such points count."""
    table = device_table() if table is None else table
    if device not in table:
        raise KeyError(f"--device {device!r} is not in src/aiayn/cost/devices.yaml; known: {sorted(table)}")
    entry = table[device]
    here = math.log(_per_token(model, vocab, lengths))
    if "points" in entry:  # sustained rates measured at a few shapes
        settings = settings or {}
        matching = [p for p in entry["points"] if p.get("when") and _holds(p["when"], settings)]
        candidates = matching or [p for p in entry["points"] if not p.get("when")]
        points = sorted(candidates, key=lambda p: p["per_token_mflops"])
        x = [math.log(p["per_token_mflops"] * 1e6) for p in points]
        i = max(0, min(len(points) - 2, sum(here > v for v in x[1:-1]))) if len(points) > 1 else 0
        a, b = points[i], points[min(i + 1, len(points) - 1)]
        t = 0.0 if a is b else min(1.0, max(0.0, (here - x[i]) / (x[i + 1] - x[i])))
        rate = (a["sustained_tflops"] + t * (b["sustained_tflops"] - a["sustained_tflops"])) * 1e12
        nearest = a if t < 0.5 else b
        return Speed(rate, rate, "measured" in nearest, nearest.get("measured", "estimate"))
    lo, hi = (math.log(_per_token(anchors()[size], vocab, lengths)) for size in ("base", "big"))
    t = min(1.0, max(0.0, (here - lo) / (hi - lo)))
    mfu = entry["base"]["mfu"] + t * (entry["big"]["mfu"] - entry["base"]["mfu"])
    measured = "measured" in entry["base"] and "measured" in entry["big"]
    peak = peak_flops(device, "bf16-mixed")  # the datasheet's dense bf16 rate, aiayn.cost.flops's table
    if peak is None:
        raise KeyError(f"no datasheet peak for {device!r} in aiayn.cost.flops.PEAK_FLOPS; add it there")
    source = entry["base"].get("measured", "estimate") if measured else entry.get("assumed", "not measured")
    if lo - here > math.log(2):  # under half base's FLOPs per token: base's MFU is out of reach
        smaller = math.exp(lo - here)
        return Speed(
            mfu * peak,
            entry["decode_mfu"] * peak,
            False,
            f"base's MFU ({source}) for a model {smaller:.0f}x smaller per token, whose steps wait on kernel "
            "launches rather than FLOPs: a lower bound on its time",
            lower_bound=True,
        )
    return Speed(mfu * peak, entry["decode_mfu"] * peak, measured, source)


def _holds(when: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """Whether the run's flattened settings have every value a measured point's `when` names."""
    return all(key in settings and settings[key] == value for key, value in when.items())


def flat_settings(cfg: Any) -> dict[str, Any]:
    """A config's train and trainer settings as dotted keys (train.loss_skip_pad, trainer.threads), what a measured
    point's `when` may name."""
    return {
        f"{group}.{f.name}": getattr(getattr(cfg, group), f.name)
        for group in ("train", "trainer")
        for f in dataclasses.fields(getattr(cfg, group))
    }


def _parts(model: ModelConfig, vocab: int, lengths: tuple[float, float]) -> dict[str, float]:
    return model_flops_per_token(model, vocab, *lengths)


def _per_token(model: ModelConfig, vocab: int, lengths: tuple[float, float]) -> float:
    parts = _parts(model, vocab, lengths)
    return parts["per_src_token"] + parts["per_tgt_token"]


def decode_flops(model: ModelConfig, vocab: int, lengths: tuple[float, float], sentences: int, beam: int) -> float:
    """Beam search over `sentences`: the encoder once per sentence, the decoder once per output token and beam."""
    parts = _parts(model, vocab, lengths)
    return sentences * (lengths[0] * parts["per_src_token"] + beam * lengths[1] * parts["per_tgt_token"])


def plan(
    params: dict[str, Any], device: str, bpe_dir: Path = Path("data/bpe"), source: str = "params.yaml"
) -> dict[str, Any]:
    """One record per row (its seeds, steps, FLOPs, hours) and the totals, for params.yaml's values (`source`
    names them in errors)."""
    from aiayn.config.composition import compose
    from aiayn.config.resolve import prepare

    read = Params.of(params, source)
    groups = [f"{k}={v}" for k in ("scale", "data", "trainer") if (v := getattr(read.values, k)) is not None]
    overrides, seeds, table = read.overrides(), read.seeds_per_row(), device_table()
    records, corpora, threads = [], {}, []
    for row in seeds:  # params.yaml's rows, validated
        cfg = prepare(compose([*groups, f"row={row}", *overrides]))
        model, vocab = cfg.model, int(cfg.data.vocab_size)
        if (cfg.data.name, vocab) not in corpora:  # every row of a pipeline usually shares one
            corpora[cfg.data.name, vocab] = corpus(cfg.data.name, vocab, bpe_dir)
        data = corpora[cfg.data.name, vocab]
        lengths = data["lengths"]
        tokens = cfg.train.max_steps * cfg.train.batch_tokens  # per side
        train = training_flops(model, vocab, tokens, tokens, *lengths)
        sentences = data["dev"] + (data["test"] if "table2" in cfg.row.tables else 0)
        beam = cfg.decode.beam_size if cfg.decode.strategy == "beam" else 1
        decode = decode_flops(model, vocab, lengths, sentences, beam)
        rate = speed(device, model, vocab, lengths, table, flat_settings(cfg))
        threads.append(int(cfg.trainer.threads or 1) if device == "CPU" else 1)
        hours = train / rate.train / 3600 + decode / rate.decode / 3600
        records.append(
            dict(
                row=row,
                seeds=len(seeds[row]),
                steps=int(cfg.train.max_steps),
                batch_tokens=int(cfg.train.batch_tokens),
                train_flops=train,
                decode_flops=decode,
                hours_per_run=hours,
                hours=hours * len(seeds[row]),
                speed=rate.source,
                measured=rate.measured,
                lower_bound=rate.lower_bound,
                lengths=lengths,
                lengths_measured=data["measured"],
            )
        )
    # launcher=parallel runs a row's seeds n_jobs at a time (the CPU rate above is one such process's, with one core
    # to itself): the wall time is then the sum over rows of their rounds of seeds, not the device-hours
    # to itself); a run with trainer.threads > 1 takes that many of the jobs' cores
    jobs = parallel_jobs() if params.get("launcher", "parallel") == "parallel" else 1
    wall = sum(r["hours_per_run"] * math.ceil(r["seeds"] / max(1, jobs // t)) for r, t in zip(records, threads))
    return dict(
        device=device,
        records=records,
        hours=sum(r["hours"] for r in records),
        wall_hours=wall,
        launcher=params.get("launcher", "parallel"),
        flops=sum((r["train_flops"] + r["decode_flops"]) * r["seeds"] for r in records),
    )


def apply_sets(params: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """`-S key=value` as `dvc exp run -S` sets params.yaml (YAML values, dotted keys)."""
    out = yaml.safe_load(yaml.safe_dump(params))
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"-S {item!r}: expected key=value")
        *parents, leaf = key.split(".")
        target = out
        for part in parents:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[leaf] = yaml.safe_load(value)
    return out


def _fmt(x: float) -> str:
    return f"{x:.2e}"


def _hours(x: float) -> str:
    """Hours to two decimals, or to one significant digit under 0.01 (a small model on a GPU)."""
    return f"{x:.2f}" if x >= 0.01 or x == 0 else f"{x:.1g}"


def format_plan(result: dict[str, Any]) -> str:
    cols = ("row", "seeds", "steps", "batch", "train FLOPs", "decode FLOPs", "h / run", "h total")
    body = [
        (
            r["row"],
            str(r["seeds"]),
            str(r["steps"]),
            str(r["batch_tokens"]),
            _fmt(r["train_flops"]),
            _fmt(r["decode_flops"]),
            _hours(r["hours_per_run"]),
            _hours(r["hours"]),
        )
        for r in result["records"]
    ]
    body.append(("total", str(sum(r["seeds"] for r in result["records"])), "", "", "", "", "", _hours(result["hours"])))
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(b, widths))) for b in body]
    first = result["records"][0] if result["records"] else None
    if first:
        source = (
            f"measured speed: {first['speed']}"
            if first["measured"]
            else f"an estimated speed ({first['speed']}: src/aiayn/cost/devices.yaml has no measurement for it yet)"
        )
        lines.append(
            f"\n{result['device']} hours from {source}; counted FLOPs in all {result['flops']:.2e}; "
            f"sentence lengths "
            f"{first['lengths'][0]:.1f}/{first['lengths'][1]:.1f} tokens "
            f"({'measured from data/bpe' if first['lengths_measured'] else 'estimated for the corpus'})."
        )
        if result["device"] == "CPU":
            lines.append(
                f"Estimated on one machine with launcher={result['launcher']}: about {duration(result['wall_hours'])} "
                f"of wall time for training and decoding (fetch, bpe and aggregate not counted), at the rate measured "
                f"on one 2-core machine; whole runs measured on others: docs/results.md#how-long-it-takes."
            )
        else:
            bound = any(r["lower_bound"] for r in result["records"])
            lines.append(
                f"One run after another on one {result['device']} (launcher={result['launcher']}): "
                f"{'at least' if bound else 'about'} {duration(result['wall_hours'])} of wall time for training and "
                "decoding"
                + (
                    "; how much longer a small model takes is measured by a GPU call (gpu/gpu_pipeline.sh)."
                    if bound
                    else "."
                )
            )
    return "\n".join(lines)


def duration(hours: float) -> str:
    """Hours as a person reads them: seconds under a minute, minutes under two hours, hours under two days, then
    days, then years."""
    if hours < 1 / 60:
        return f"{hours * 3600:.0f} s"
    if hours < 2:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} hours"
    if hours < 24 * 730:
        return f"{hours / 24:.0f} days"
    return f"{hours / (24 * 365):,.0f} years"


def parallel_jobs() -> int:
    """How many seeds of a row launcher=parallel runs side by side (conf/hydra/launcher/parallel.yaml's n_jobs)."""
    from aiayn.config.composition import CONF_DIR

    launcher = yaml.safe_load((CONF_DIR / "hydra" / "launcher" / "parallel.yaml").read_text(encoding="utf-8"))
    return max(1, int(launcher.get("n_jobs") or 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiayn-plan", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="the DVC params file (default: params.yaml)")
    parser.add_argument(
        "-S",
        "--set",
        dest="sets",
        action="append",
        default=[],
        help="a params.yaml value, as `dvc exp run -S`: scale=paper, 'rows=[base,big]', train.max_steps=1000",
    )
    parser.add_argument(
        "--device", default=None, help="H200, H100, A100, V100 or CPU (default: CPU for trainer=cpu, else H200)"
    )
    parser.add_argument("--bpe-dir", default="data/bpe", help="where to measure sentence lengths, when present")
    args = parser.parse_args(argv)
    try:
        params = apply_sets(yaml.safe_load(Path(args.params).read_text(encoding="utf-8")), args.sets)
        device = args.device or ("CPU" if params.get("trainer", "cpu").startswith("cpu") else "H200")
        source = f"{args.params} (with -S)" if args.sets else args.params
        print(format_plan(plan(params, device, Path(args.bpe_dir), source)))
    except (KeyError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
