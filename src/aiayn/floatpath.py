"""The CPU's arithmetic, pinned: the same float operations in the same order on any x86-64 machine.

A CPU run's numbers depend on more than its seed. PyTorch picks its vectorised kernels by the machine's widest
instruction set (AVX-512 where there is one, else AVX2), MKL's matrix products do the same, and the intra-op thread
count splits reductions differently. Each changes the last bits of a step, and training, a chaotic process, turns
them into different weights: on one machine, base's dev PPL moved by up to 1.5% between AVX-512 and AVX2 kernels
and between one and two threads (docs/results.md#the-same-numbers-on-another-machine).

`pin` fixes all three for a stage: `trainer.threads` intra-op threads and `trainer.cpu_isa` kernels, through
PyTorch's own switch (ATEN_CPU_CAPABILITY) and MKL's Conditional Numerical Reproducibility (MKL_CBWR), which
promises the same results on every processor that has the instruction set. Both are read when PyTorch and MKL
first compute, so the stage pins before its first tensor operation; where that is too late (a tensor operation
already ran in the process) it warns, and train.json's `float_path` records what ran.
"""

from __future__ import annotations

import logging
import os
import platform

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


def described() -> str:
    """The float path this process computes on, for a run's record: "AVX2 kernels, MKL_CBWR=AVX2, 1 thread"."""
    import torch

    cbwr = os.environ.get("MKL_CBWR")
    threads = torch.get_num_threads()
    return (
        f"{torch.backends.cpu.get_cpu_capability()} kernels, "
        + (f"MKL_CBWR={cbwr}" if cbwr else "MKL unpinned")
        + f", {threads} thread{'s' if threads != 1 else ''}"
    )
