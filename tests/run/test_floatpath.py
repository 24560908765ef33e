"""The pinned float path (aiayn.run.floatpath): a CPU run computes the same numbers whatever the machine offers it.

Each case runs in a fresh interpreter, since PyTorch and MKL fix their kernels at their first operation.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

x86 = platform.machine().lower() in ("x86_64", "amd64")
avx2 = x86 and "avx2" in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else "")
avx512 = avx2 and "avx512f" in Path("/proc/cpuinfo").read_text()


def pinned() -> str:
    from aiayn.run.floatpath import cpu_vendor, mkl_branch

    return f"AVX2 kernels, {mkl_branch('AVX2', cpu_vendor())}, 1 thread"


# A few training steps of a small Transformer: matrix products (MKL), softmax, LayerNorm and Adam (PyTorch's
# vectorised kernels) and reductions that split across threads.
_TRAIN = """
import json, sys
from aiayn.run.floatpath import described, pin
threads, isa = json.loads(sys.argv[1])
pin(threads, isa)
import torch
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
torch.manual_seed(0)
model = Transformer(ModelConfig(n_layers=2, d_model=64, d_ff=256, n_heads=4, d_k=16, d_v=16, dropout=0.0,
                                max_positions=64), vocab_size=97)
opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
src, tgt = torch.randint(4, 97, (32, 21)), torch.randint(4, 97, (32, 19))
for _ in range(4):
    loss = torch.nn.functional.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())
    opt.zero_grad(); loss.backward(); opt.step()
print(json.dumps({"loss": loss.item(), "weight": model.output_weight.double().sum().item(), "path": described()}))
"""


def _train(threads: int | None, isa: str | None, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    out = subprocess.run(
        [sys.executable, "-c", _TRAIN, json.dumps([threads, isa])],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not avx512, reason="needs an x86-64 CPU with AVX-512, whose unpinned path differs from AVX2's")
def test_a_pinned_run_is_the_same_on_an_avx2_machine_with_more_cores_and_unpinned_ones_differ() -> None:
    """This machine with AVX-512 kernels and one thread, against it emulating an AVX2-only machine that gives the
    run two threads (PyTorch's and MKL's instruction-set switches, OMP's thread count): pinned, the weights after
    four Adam steps agree to the bit; unpinned, they differ."""
    other_machine = dict(ATEN_CPU_CAPABILITY="avx2", MKL_ENABLE_INSTRUCTIONS="AVX2", OMP_NUM_THREADS="2")
    here, there = _train(1, "avx2"), _train(1, "avx2", **other_machine)
    assert here == there and here["path"] == pinned()
    free_here, free_there = _train(1, None), _train(None, None, **other_machine)
    assert free_here["path"].startswith("AVX512 kernels") and free_there["path"].startswith("AVX2 kernels")
    assert free_here["weight"] != free_there["weight"]  # the negative control: what the pin removes


@pytest.mark.skipif(not avx2, reason="needs an x86-64 CPU with AVX2")
def test_a_pin_after_the_first_tensor_operation_warns_and_says_what_ran() -> None:
    code = (
        "import torch, logging; logging.basicConfig(); torch.ones(3).exp(); "
        "from aiayn.run.floatpath import pin, described; pin(2, 'avx2'); print(described())"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    if avx512:  # PyTorch had already chosen AVX-512 kernels
        assert "trainer.cpu_isa=avx2: PyTorch computes with AVX512 kernels" in out.stderr
        assert out.stdout.startswith("AVX512 kernels") and out.stdout.strip().endswith("2 threads")


def test_a_float_path_that_does_not_exist_is_refused() -> None:
    from aiayn.run.floatpath import FloatPathError, pin

    with pytest.raises(FloatPathError, match="trainer.cpu_isa='sse4'"):
        pin(None, "sse4")
    with pytest.raises(FloatPathError, match="trainer.threads=0"):
        pin(0, None)


def test_the_record_says_which_mkl_branch_computes() -> None:
    """MKL honours MKL_CBWR=AVX2 on Intel CPUs only; elsewhere the record names the AUTO branch that computes."""
    from aiayn.run.floatpath import cpu_vendor, mkl_branch

    assert cpu_vendor("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n") == "AuthenticAMD"
    assert cpu_vendor("processor : 0\n") is None
    assert mkl_branch("AVX2", "GenuineIntel") == "MKL_CBWR=AVX2"
    assert mkl_branch("AVX2", "AuthenticAMD") == "MKL_CBWR=AVX2 (AUTO on this AuthenticAMD CPU)"
    assert mkl_branch("BRANCH=AVX512,STRICT", "AuthenticAMD").endswith("(AUTO on this AuthenticAMD CPU)")
    assert (
        mkl_branch("COMPATIBLE", "AuthenticAMD") == "MKL_CBWR=COMPATIBLE" and mkl_branch(None, None) == "MKL unpinned"
    )
    assert mkl_branch("AVX2", None) == "MKL_CBWR=AVX2"  # no vendor to read: as asked


@pytest.mark.skipif(not avx2, reason="needs an x86-64 CPU with AVX2")
def test_off_intel_mkl_computes_the_avx2_branch_as_auto() -> None:
    """What the record's "(AUTO on this ... CPU)" rests on: on a CPU that is not Intel's, MKL_CBWR=AVX2 trains the
    same weights as MKL_CBWR=AUTO; on Intel's, the AVX2 branch is honoured (and the record says only MKL_CBWR=AVX2)."""
    from aiayn.run.floatpath import cpu_vendor

    if cpu_vendor() in (None, "GenuineIntel"):
        pytest.skip("an Intel CPU honours MKL's branches")
    avx2_branch, auto = _train(1, "avx2"), _train(1, None, ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="AUTO")
    assert avx2_branch["weight"] == auto["weight"] and avx2_branch["loss"] == auto["loss"]
    assert avx2_branch["path"] == pinned()
    # the control: MKL computes these products and reads MKL_CBWR (its branch for every vendor gives other weights)
    compatible = _train(1, None, ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="COMPATIBLE")
    assert compatible["weight"] != auto["weight"]


def test_a_run_resumed_on_another_float_path_lists_each_segment_and_says_it_is_mixed(tmp_path, caplog) -> None:
    from aiayn.run.floatpath import mixed, record_segment

    path = tmp_path / "segments.json"
    first = record_segment(path, 0, "AVX512 kernels, MKL unpinned, 2 threads")
    assert [s["from_step"] for s in first] == [0] and not mixed(first)
    # killed before its first checkpoint: the next process resumes from the same step and replaces the segment
    again = record_segment(path, 0, "AVX512 kernels, MKL unpinned, 2 threads")
    assert len(again) == 1
    with caplog.at_level("WARNING", logger="aiayn.run.floatpath"):
        resumed = record_segment(path, 300, "AVX2 kernels, MKL_CBWR=AVX2, 1 thread")
    assert [s["from_step"] for s in resumed] == [0, 300] and mixed(resumed)
    assert "resumed at step 300 on another float path" in caplog.text and "from step 0: AVX512" in caplog.text
    assert json.loads(path.read_text()) == resumed
    # a resume from a checkpoint older than a segment's start drops that segment: its steps are redone
    back = record_segment(path, 200, "AVX512 kernels, MKL unpinned, 2 threads")
    assert [s["from_step"] for s in back] == [0, 200] and not mixed(back)


def test_a_segments_file_that_does_not_parse_is_named_and_replaced(tmp_path, caplog) -> None:
    from aiayn.run.floatpath import record_segment

    path = tmp_path / "segments.json"
    path.write_text("{not json")
    with caplog.at_level("WARNING", logger="aiayn.run.floatpath"):
        segments = record_segment(path, 50, None)
    assert f"{path}: unreadable" in caplog.text
    assert [s["from_step"] for s in segments] == [50]


def test_the_cpu_model_is_read_from_cpuinfo() -> None:
    from aiayn.run.floatpath import cpu_model

    assert cpu_model("vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n") == "AMD EPYC 9R14"
    assert cpu_model("processor : 0\n") is None
