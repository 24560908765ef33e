"""Where everything lives, decided in one place: each run's folders and the files in them, and the data stages' files.

A run is a row, a seed and a variant: the result-changing settings in which it differs from its row at its scale
(aiayn.config.composition finds them). From those, RunSpec names its folders, `runs/{row}/{variant}/seed{seed}` for the
train stage and `evals/{row}/{variant and decode settings}/seed{seed}` for the evaluate stage, and the files in
them; `seed_of` and `evaluated` read folders back. The stages, the wandb artifacts, the tables'
readers and the benchmarks all take their paths from here; what a run depends on is aiayn.train.fingerprint's.

A checkpoint cadence (the schema's `averaging` settings: which weights a row that averages checkpoints for Table 2
averages) names the train folder of every row whose variant sets it, averaging or not, so that a folder's name
follows from the variant alone; a row that averages nothing trains again under such a name, to the same numbers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The data stages' files, declared once: fetch writes data/raw/{split}.{side} and stats.json; bpe writes data/bpe
# (the tokenizer, each split encoded, stats.json).
SPLITS = ("train", "valid", "test")
TOKENIZER = "spm.model"  # the bpe stage's joint sentencepiece model
TOKENIZER_PREFIX = "spm"  # what sentencepiece is told to write: TOKENIZER and spm.vocab
DATA_STATS = "stats.json"  # what fetch's cleaning kept and dropped; bpe's vocabulary and lengths


def raw_file(split: str, side: str) -> str:
    """A cleaned split's text, one sentence a line: `side` is "src" or "tgt" (valid.tgt)."""
    return f"{split}.{side}"


# The files of a run, declared once. The train stage's folder:
CONFIG = "config.yaml"  # the resolved config, written first (a crashed run still says what it was)
TRAIN_SUMMARY = "train.json"  # written last, when the run finished
CURVE = "curve.csv"  # aiayn.run.curve's columns
SEGMENTS = "segments.json"  # each process that trained the run: from which step, on which float path (floatpath)
CHECKPOINTS = "checkpoints"  # last.ckpt to resume from, step-*.ckpt snapshots to average
LAST_CHECKPOINT = "last.ckpt"
SNAPSHOT = "step-{step:08d}"  # an averaging snapshot's name, without its .ckpt
SNAPSHOT_GLOB = "step-*.ckpt"
FINGERPRINT = "aiayn_fingerprint"  # the checkpoint key holding the run's fingerprint (`fingerprint` below)
LOCK = ".lock"
STALE = "stale-checkpoints-"  # + a time stamp: checkpoints of another config, moved aside
# The evaluate stage's folder: eval.json, the hypotheses, and a copy of `run_files()`.
EVAL = "eval.json"
PLAN = "plan.json"  # results/: Table 3's plan as the aggregate stage decided it (aiayn.verdicts.decide.PlanRecord)
TABLE3_CSV = "table3.csv"  # results/: Table 3 as CSV
ENSEMBLE = "ensemble"  # evals/{row}/[{variant}/]ensemble/: Table 2's row as the ensemble of its seeds


def run_files() -> tuple[str, ...]:
    """What the evaluate stage copies of a run beside its evaluation: all the aggregate stage reads of a run, so
    that it depends on the evaluations alone, never on checkpoints."""
    return (CONFIG, TRAIN_SUMMARY, CURVE)


def hyps_file(split: str) -> str:
    """The hypotheses of one decoded split ("valid", "test")."""
    return f"hyps.{split}.txt"


EVAL_ONLY = ("decode",)  # groups that change an evaluation, not the training run
SWEPT = ("decode.beam_size", "decode.length_penalty", "decode.length_norm")  # what pipeline/tune_decode.py sweeps
# Not in a sweep's folder either: what it sweeps, and what it does not use (it decodes dev with row.average_last's
# weights and scores without a bootstrap)
NOT_TUNING = frozenset((*SWEPT, "decode.bootstrap", "row.dev_average_last"))
MAX_SLUG = 64  # characters of a folder name before it is shortened with a hash


def _is_eval_only(key: str) -> bool:
    return key.removeprefix("row.").split(".")[0] in EVAL_ONLY or key in ("row.average_last", "row.dev_average_last")


def _value(value: Any) -> str:
    """A value as a Hydra override would spell it, integral floats without ".0" (lr_factor=2)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def slug(variant: Mapping[str, Any]) -> str:
    """A readable folder name for a variant ("lr_factor=2,dropout=0.2"), "" for none; keys by their last part
    unless two share it; names longer than MAX_SLUG characters keep a prefix and gain a short hash of the whole."""
    keys = list(variant)
    if not keys:
        return ""
    leaves = [k.rsplit(".", 1)[-1] for k in keys]
    names = [leaf if leaves.count(leaf) == 1 else key for key, leaf in zip(keys, leaves)]
    text = ",".join(f"{name}={_value(variant[key])}" for name, key in zip(names, keys))
    text = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)
    if len(text) <= MAX_SLUG:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: MAX_SLUG - 9].rstrip(',')}-{digest}"


SEED_FOLDER = re.compile(r"seed(\d+)")  # a run's own folder: seed{seed}


@dataclass(frozen=True)
class RunSpec:
    """One run: a row and seed and its variant (dotted key -> value, in the order aiayn.config.composition gives),
    under the runs/ and evals/ roots."""

    row: str
    seed: int
    variant: tuple[tuple[str, Any], ...] = ()
    runs: Path = Path("runs")
    evals: Path = Path("evals")
    tuning: Path = Path("decode_tuning")

    @classmethod
    def of(cls, cfg) -> RunSpec:
        """The run a composed config (with its `variant`) describes."""
        return cls.for_row(
            cfg.row.name,
            int(cfg.seed),
            dict(cfg.variant),
            runs=cfg.paths.runs,
            evals=cfg.paths.evals,
            tuning=cfg.paths.tuning,
        )

    @classmethod
    def for_row(
        cls,
        row: str,
        seed: int,
        variant: Mapping[str, Any] | None = None,
        runs: Path | str = "runs",
        evals: Path | str | None = None,
        tuning: Path | str = "decode_tuning",
    ) -> RunSpec:
        """A row's run of a variant; `evals` defaults to `runs` (one folder for both)."""
        return cls(
            row,
            int(seed),
            tuple(dict(variant or {}).items()),
            Path(runs),
            Path(runs if evals is None else evals),
            Path(tuning),
        )

    def _folder(self, evaluation: bool, swept: bool = True) -> str:
        kept = {
            k: v
            for k, v in self.variant
            if (evaluation or not _is_eval_only(k)) and (swept or not {k, k.removeprefix("row.")} & NOT_TUNING)
        }
        name = slug(kept)
        return f"{name}/" if name else ""

    @property
    def train_folder(self) -> str:
        """ "" for the row itself, else the variant's folder name with its "/" (lr_factor=2/)."""
        return self._folder(evaluation=False)

    @property
    def eval_folder(self) -> str:
        """The train folder's name with the decode settings (and average_last) that change the evaluation."""
        return self._folder(evaluation=True)

    @property
    def run_dir(self) -> Path:
        return self.runs / self.row / f"{self.train_folder}seed{self.seed}"

    @property
    def eval_dir(self) -> Path:
        return self.evals / self.row / f"{self.eval_folder}seed{self.seed}"

    @property
    def ensemble_dir(self) -> Path:
        """The evaluation folder of the ensemble of this row's (and variant's) seeds, beside theirs."""
        return self.evals / self.row / f"{self.eval_folder}{ENSEMBLE}"

    @property
    def tuning_dir(self) -> Path:
        """pipeline/tune_decode.py's folder for this run's decoding sweep: the evaluation's folder without the swept
        keys, so that sweeps at another averaging (row.average_last=10) or max_len_b have their own."""
        return self.tuning / self.row / f"{self._folder(evaluation=True, swept=False)}seed{self.seed}"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / CHECKPOINTS

    def name(self, job_type: str = "train") -> str:
        """ "{row}-s{seed}", with the variant's folder name between for a variant (base-lr_factor=2-s1)."""
        folder = (self.train_folder if job_type == "train" else self.eval_folder).rstrip("/")
        return f"{self.row}-{folder}-s{self.seed}" if folder else f"{self.row}-s{self.seed}"

    def shown(self, path: Path) -> str:
        """A path of this run named from its root folder's own name down ("evals/A1/seed2/eval.json"), so that
        messages and tables do not depend on where the checkout lives."""
        for root in (self.runs, self.evals, self.tuning):
            if path.is_relative_to(root):
                return f"{root.name}/{path.relative_to(root).as_posix()}"
        return str(path)


def seed_of(folder: Path | str) -> int | None:
    """The seed a run folder's name says (seed3 -> 3); None for a folder of another name."""
    match = SEED_FOLDER.fullmatch(Path(folder).name)
    return int(match.group(1)) if match else None


def evaluated(evals: Path | str, row: str) -> dict[str, dict[int, Path]]:
    """A row's evaluated runs under the evals/ root: each eval folder ("" for the row itself first, then the
    variants' "lr_factor=2/" by name) -> seed -> its eval.json."""
    found: dict[str, dict[int, Path]] = {}
    for path in sorted((Path(evals) / row).glob(f"**/seed*/{EVAL}")):
        seed = seed_of(path.parent)
        if seed is not None:
            folder = path.parent.parent.relative_to(Path(evals) / row).as_posix()
            found.setdefault("" if folder == "." else f"{folder}/", {})[seed] = path
    return dict(sorted(found.items(), key=lambda item: (item[0] != "", item[0])))
