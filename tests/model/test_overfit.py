"""A tiny model, trained with the paper's loss, schedule and Adam settings, learns to copy."""

from __future__ import annotations

import torch

from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.train.label_smoothing import label_smoothed_nll_loss
from aiayn.train.schedule import inverse_sqrt_lr

PAD, BOS, EOS, VOCAB = 0, 1, 2, 12


def _copy_batch(n: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    body = torch.randint(3, VOCAB, (n, length), generator=torch.Generator().manual_seed(seed))
    src = torch.cat([body, torch.full((n, 1), EOS)], dim=1)
    tgt_in = torch.cat([torch.full((n, 1), BOS), body], dim=1)
    return src, tgt_in, src  # the target output is the source itself, EOS included


def test_tiny_model_overfits_a_copy_task():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(n_layers=2, d_model=64, d_ff=128, n_heads=4, d_k=16, d_v=16, dropout=0.0), VOCAB)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: inverse_sqrt_lr(k + 1, 64, 100, factor=0.5))
    src, tgt_in, tgt_out = _copy_batch(32, 8, seed=1)
    first = None
    for _ in range(300):
        loss, nll = label_smoothed_nll_loss(model(src, tgt_in), tgt_out, 0.0, PAD)
        tokens = (tgt_out != PAD).sum()
        optimizer.zero_grad()
        (loss / tokens).backward()
        optimizer.step()
        schedule.step()
        first = first if first is not None else nll.item() / tokens.item()
    final = nll.item() / tokens.item()
    assert first > 1.5  # starts near log(VOCAB) = 2.5
    assert final < 0.02, f"per-token NLL after training {final:.4f}"
