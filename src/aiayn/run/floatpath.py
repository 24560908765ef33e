"""The CPU's arithmetic, pinned: the same float operations in the same order on any Intel x86-64 machine.

A CPU run's numbers depend on more than its seed. PyTorch picks its vectorised kernels by the machine's widest
instruction set (AVX-512 where there is one, else AVX2), MKL's matrix products do the same, and the intra-op thread
count splits reductions differently. Each changes the last bits of a step, and training, a chaotic process, turns
them into different weights: on one machine, base's dev PPL moved by up to 1.5% between AVX-512 and AVX2 kernels
and between one and two threads (docs/results.md#the-same-numbers-on-another-machine).

`pin` fixes all three for a stage: `trainer.threads` intra-op threads and `trainer.cpu_isa` kernels, through
PyTorch's own switch (ATEN_CPU_CAPABILITY) and MKL's Conditional Numerical Reproducibility (MKL_CBWR), which
promises the same results on every Intel processor that has the instruction set. Both are read when PyTorch and MKL
first compute, so the stage pins before its first tensor operation; where that is too late (a tensor operation
already ran in the process) it warns, and train.json's `float_path` records what ran.

MKL honours a branch other than AUTO or COMPATIBLE on Intel processors only: elsewhere it computes with its AUTO
branch and says nothing (Intel's documentation; on an AMD EPYC, MKL_CBWR=AVX2 and MKL_CBWR=AUTO trained the same
weights to the digit, and other ones than an Intel machine's pinned run: docs/results.md#on-an-amd-cpu). `described`
names that in the record, so two runs whose float paths read differently are not expected to agree. COMPATIBLE
(SSE2), the branch both vendors honour (the same numbers on both, by Intel's documentation; not compared here), costs
1.45x a tiny-scale run's training time there: not the default.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from pathlib import Path
from typing import Any

from aiayn.io import atomic_write_json

log = logging.getLogger(__name__)

# trainer.cpu_isa -> (PyTorch's capability name, MKL_CBWR's branch)
ISAS = {"avx2": ("AVX2", "AVX2"), "avx512": ("AVX512", "AVX512")}


def supported(cpu_isa: str) -> bool:
    """Whether this CPU has `cpu_isa`'s instructions (read from its flags, without fixing PyTorch's kernels):
    PyTorch takes ATEN_CPU_CAPABILITY at its word, and a kernel the CPU lacks would stop the process."""
    import torch

    return {"avx2": torch.cpu._is_avx2_supported, "avx512": torch.cpu._is_avx512_supported}[cpu_isa]()


class FloatPathError(RuntimeError):
    """The float path could not be pinned as the config asks."""


def full_precision(precision: str) -> bool:
    """Whether a Lightning precision computes in float32 or float64, the arithmetic a pin of the kernels is for:
    PyTorch's bf16 attention on an AVX-512 CPU refuses AVX2 dispatch ("pack_vnni2 is only supported when avx512 is
    supported"), so half precision keeps the machine's kernels."""
    return str(precision).startswith(("32", "64"))


def pin(threads: int | None, cpu_isa: str | None) -> None:
    """Pin this process's intra-op threads (None: leave them) and CPU kernels (None: the machine's best)."""
    import torch

    if cpu_isa is not None:
        if cpu_isa not in ISAS:
            raise FloatPathError(f"trainer.cpu_isa={cpu_isa!r}: expected one of {sorted(ISAS)} or null")
        if platform.machine().lower() not in ("x86_64", "amd64") or not supported(cpu_isa):
            log.warning(
                "trainer.cpu_isa=%s: this %s CPU lacks those instructions and computes with its own kernels, so its "
                "numbers will differ from a pinned run's in the last digits (train.json's float_path says which ran)",
                cpu_isa,
                platform.machine(),
            )
        else:
            aten, mkl = ISAS[cpu_isa]
            os.environ["ATEN_CPU_CAPABILITY"] = cpu_isa
            os.environ["MKL_CBWR"] = mkl
            got = torch.backends.cpu.get_cpu_capability()  # fixed by the first kernel PyTorch dispatched
            if got != aten:
                log.warning(
                    "trainer.cpu_isa=%s: PyTorch computes with %s kernels, not %s (a tensor operation ran in this "
                    "process before the stage could pin them): its numbers will differ from a pinned run's in the "
                    "last digits (train.json's float_path says which path ran)",
                    cpu_isa,
                    got,
                    aten,
                )
    if threads is not None:
        if threads < 1:
            raise FloatPathError(f"trainer.threads={threads}: expected at least 1, or null")
        torch.set_num_threads(threads)


def pin_stage(trainer, precision: str) -> str | None:
    """Pin a stage's float path as its `trainer` config says (a CPU run's threads and kernels; half `precision` keeps
    the machine's kernels, `full_precision`) and describe it for the run's record; None on an accelerator."""
    if trainer.accelerator != "cpu":
        return None
    pin(trainer.threads, trainer.cpu_isa if full_precision(precision) else None)
    return described()


def cpu_vendor(cpuinfo: str | None = None) -> str | None:
    """The CPU's vendor string ("GenuineIntel", "AuthenticAMD") from /proc/cpuinfo (or the text given); None where
    there is none to read (not Linux, not x86)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read(65536)
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id":
            return value.strip() or None
    return None


def mkl_branch(cbwr: str | None, vendor: str | None) -> str:
    """MKL_CBWR as MKL applies it: "AVX2", or "AVX2 (AUTO on this AuthenticAMD CPU)" where the vendor is not Intel
    and the branch is one MKL honours on Intel processors only."""
    if not cbwr:
        return "MKL unpinned"
    branch = cbwr.split(",")[0].removeprefix("BRANCH=").strip().upper()
    if vendor and vendor != "GenuineIntel" and branch not in ("AUTO", "COMPATIBLE"):
        return f"MKL_CBWR={cbwr} (AUTO on this {vendor} CPU)"
    return f"MKL_CBWR={cbwr}"


def described() -> str:
    """The float path this process computes on, for a run's record: "AVX2 kernels, MKL_CBWR=AVX2, 1 thread", with
    the branch MKL takes instead where it ignores the one asked for (`mkl_branch`)."""
    import torch

    threads = torch.get_num_threads()
    return (
        f"{torch.backends.cpu.get_cpu_capability()} kernels, "
        + mkl_branch(os.environ.get("MKL_CBWR"), cpu_vendor())
        + f", {threads} thread{'s' if threads != 1 else ''}"
    )


def cpu_model(cpuinfo: str | None = None) -> str | None:
    """The CPU's model name from /proc/cpuinfo (or the text given), e.g. "AMD EPYC"; None where there is none."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read(65536)
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip() or None
    return None


def segment_machine(float_path: str | None) -> dict[str, Any]:
    """What decides the numbers of a stretch of training besides its seed and data: the float path, the CPU's model
    (two vendors' CPUs read alike in `described`), the torch version."""
    import torch

    return {"float_path": float_path, "cpu": cpu_model() or platform.processor() or None, "torch": torch.__version__}


def record_segment(path: Path, from_step: int, float_path: str | None) -> list[dict[str, Any]]:
    """Add this process's stretch of a run to its segments file (`path`, the run folder's segments.json) and return
    every segment: the ones that trained the steps before `from_step` (those a resume keeps), then this one. A
    process killed before its first checkpoint leaves a segment that the next one, resuming from the same step,
    replaces. Written atomically; a file that does not parse is named and replaced, its segments unknown."""
    segments: list[dict[str, Any]] = []
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            segments = [s for s in loaded if isinstance(s, dict) and int(s.get("from_step", -1)) < from_step]
        except (ValueError, TypeError) as err:
            log.warning("%s: unreadable (%s); the segments before step %d are not known", path, err, from_step)
    this = {"from_step": int(from_step), **segment_machine(float_path)}
    if segments and any(_machine(s) != _machine(this) for s in segments):
        log.warning(
            "%s: resumed at step %d on another float path or CPU than the steps before (%s; now %s): train.json's "
            "segments list each, and the run's numbers are not those of one path",
            path.parent,
            from_step,
            "; ".join(f"from step {s['from_step']}: {_label(s)}" for s in segments),
            _label(this),
        )
    segments.append(this)
    atomic_write_json(path, segments)
    return segments


def _machine(segment: dict[str, Any]) -> tuple[Any, ...]:
    return segment.get("float_path"), segment.get("cpu"), segment.get("torch")


def _label(segment: dict[str, Any]) -> str:
    return f"{segment.get('float_path')} on {segment.get('cpu')}, torch {segment.get('torch')}"


def mixed(segments: list[dict[str, Any]]) -> bool:
    """Whether a run's segments ran on more than one float path, CPU model or torch version."""
    return len({_machine(s) for s in segments}) > 1
