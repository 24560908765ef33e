"""MFU: the datasheet peak lookup and the counted FLOPs of one micro-batch."""

from __future__ import annotations

import pytest
import torch

from aiayn.cost.flops import peak_flops, training_flops
from aiayn.model.config import ModelConfig
from aiayn.train.mfu import MFUMonitor, batch_flops

MODEL = ModelConfig(n_layers=2, d_model=64, d_ff=256, n_heads=4, d_k=16, d_v=16, dropout=0.1)


@pytest.mark.parametrize(
    "name, precision, expected",
    [
        ("NVIDIA H200", "bf16-mixed", 989e12),
        ("NVIDIA H100 PCIe", "bf16-mixed", 756e12),  # the longer name wins over plain H100
        ("NVIDIA A100-SXM4-80GB", "32-true", 19.5e12),
        ("cpu", "32-true", None),
    ],
)
def test_peak_flops_by_device_name_and_precision(name: str, precision: str, expected) -> None:
    assert peak_flops(name, precision) == expected


def test_batch_flops_counts_real_tokens_at_mean_lengths() -> None:
    batch = dict(src=torch.zeros(4, 10), n_src_tokens=32, n_tgt_tokens=36)
    assert batch_flops(MODEL, 1000, batch) == training_flops(MODEL, 1000, 32, 36, 8.0, 9.0)
    assert batch_flops(MODEL, 1000, dict(batch, n_src_tokens=0)) == 0.0


def test_a_non_positive_configured_peak_is_refused() -> None:
    with pytest.raises(ValueError, match="peak_flops"):
        MFUMonitor(MODEL, 1000, 10, "32-true", peak=0.0)
