"""Section 5.3's optimizer as configure_optimizers builds it: Adam(0.9, 0.98, 1e-9), fused on CPU too."""

from __future__ import annotations

import pytest
import torch

from aiayn.config.schema import ModelConfig, TrainConfig
from aiayn.train.module import TranslationModule


def module(**train) -> TranslationModule:
    model = ModelConfig(n_layers=1, d_model=16, d_ff=32, n_heads=2, d_k=8, d_v=8)
    return TranslationModule(model, TrainConfig(**train), vocab_size=50, pad_id=0)


@pytest.mark.parametrize("fused", [True, False])
def test_adam_is_the_papers_and_fused_on_cpu_when_asked(fused: bool) -> None:
    optimizer = module(fused_adam=fused).configure_optimizers()["optimizer"]
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults["betas"] == (0.9, 0.98) and optimizer.defaults["eps"] == 1e-9
    assert bool(optimizer.defaults["fused"]) is fused


def test_fused_and_loop_adam_take_the_same_steps() -> None:
    torch.manual_seed(0)
    runs = []
    for fused in (True, False):
        torch.manual_seed(0)
        m = module(fused_adam=fused)
        optimizer = m.configure_optimizers()["optimizer"]
        for _ in range(3):
            optimizer.zero_grad()
            sum((p**2).sum() for p in m.parameters()).backward()
            optimizer.step()
        runs.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
    torch.testing.assert_close(runs[0], runs[1], atol=1e-6, rtol=1e-5)
