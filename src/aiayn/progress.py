"""Plain progress lines for long jobs whose output goes to a file (dvc repro, SLURM, nohup), where a progress bar
prints nothing readable: "decode valid: 1200/3003 sentences (40%), 85.2/s, elapsed 0:00:14, ETA 0:00:21".

A line at most every `every_s` seconds, and one at the end; done / total, the rate, elapsed time and the ETA.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from datetime import timedelta

from tqdm import tqdm

log = logging.getLogger("aiayn.progress")


# Other libraries' lines a long job's log has no use for, each silenced at its source: Lightning's banners and tips
# (GPU/TPU available, the LitLogger tip, "Seed set to", "`Trainer.fit` stopped": INFO through its own loggers) and
# one deprecation inside Lightning's code that only a Lightning release can fix, and Lightning's warning that a run
# resumed mid-epoch has a dataloader that is "not resumable": it checks the DataLoader object alone, where the
# TranslationDataModule's state_dict puts the sampler back at the batch it stopped at (aiayn.data.datamodule), so
# a resumed run trains on exactly the batches an unbroken one does (tests/integration/reliability/test_resume.py).
QUIET_LOGGERS = ("lightning.pytorch", "lightning.fabric")
QUIET_WARNINGS = (
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # lightning/pytorch/utilities/_pytree.py
    r"You're resuming from a checkpoint that ended before the epoch ended",  # loops/training_epoch_loop.py
)


def quiet_third_parties() -> None:
    """Silence the lines above: their loggers at WARNING (Lightning sets INFO when imported, so this runs after),
    the warnings filtered by message. Warnings and errors of every library still print."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)


def clock(seconds: float) -> str:
    """H:MM:SS, the way a person reads a duration in a log."""
    return str(timedelta(seconds=round(max(seconds, 0.0))))


def eta(done: float, total: float, elapsed: float) -> str:
    """Time left at the rate so far; "?" before anything is done."""
    return clock(elapsed * (total - done) / done) if done > 0 else "?"


def on_terminal() -> bool:
    """Whether a person watches this process's output live (a progress bar is for them; a log file gets lines)."""
    return sys.stderr.isatty()


def byte_bar(total: int | None, desc: str, progress: bool, initial: int = 0) -> tqdm:
    """A byte progress bar for downloads and extraction, shown only when asked for and on a terminal."""
    return tqdm(
        total=total, initial=initial, desc=desc, unit="B", unit_scale=True, disable=not (progress and on_terminal())
    )


class Progress:
    """Counts work done towards `total` and logs a progress line at most every `every_s` seconds, and one at the end
    (with `always_last=False` only when a line came before: a job whose caller sums it up in its own line)."""

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str,
        every_s: float = 30.0,
        logger: logging.Logger = log,
        always_last: bool = True,
    ) -> None:
        self.what, self.total, self.unit, self.every_s, self.log = what, total, unit, every_s, logger
        self.always_last, self.lines = always_last, 0
        self.done = 0
        self._t0 = self._last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            self._line(now)

    def finish(self) -> None:
        """The last line: everything done, the average rate."""
        if self.always_last or self.lines:
            self._line(time.perf_counter())

    def _line(self, now: float) -> None:
        self.lines += 1
        elapsed = now - self._t0
        rate = self.done / max(elapsed, 1e-9)
        if self.total:
            self.log.info(
                "%s: %d/%d %s (%.0f%%), %.1f/s, elapsed %s, ETA %s",
                self.what,
                self.done,
                self.total,
                self.unit,
                100 * self.done / self.total,
                rate,
                clock(elapsed),
                eta(self.done, self.total, elapsed),
            )
        else:
            self.log.info("%s: %d %s, %.1f/s, elapsed %s", self.what, self.done, self.unit, rate, clock(elapsed))
