"""The same properties on a CUDA device, where other fused attention kernels are chosen (skipped without one)."""

from __future__ import annotations

import pytest
import torch

from aiayn.model.attention import scaled_dot_product_attention
from aiayn.model.cache import KVCache
from aiayn.model.masks import causal_mask, src_mask
from aiayn.train.label_smoothing import label_smoothed_nll_loss

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
PAD = 0


def test_fused_equals_reference_on_gpu_with_an_empty_row():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 6, 16, generator=g), torch.randn(2, 4, 9, 16, generator=g)
    v = torch.randn(2, 4, 9, 8, generator=g)
    mask = torch.rand(2, 1, 6, 9, generator=g) > 0.3
    mask[1, 0, 4] = False
    q, k, v, mask = (t.cuda() for t in (q, k, v, mask))
    fused = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(fused).all() and (fused[1, :, 4] == 0).all()
    torch.testing.assert_close(fused, scaled_dot_product_attention(q, k, v, mask, reference=True), atol=1e-5, rtol=1e-5)


def test_gpu_model_matches_cpu_and_cache_matches_full(make_model, tokens):
    model = make_model()
    src, tgt_in = tokens(3, 7), tokens(3, 6, seed=1)
    src[2, 4:] = PAD
    expected = model(src, tgt_in)
    model, src, tgt_in = model.cuda(), src.cuda(), tgt_in.cuda()
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt_in).cpu(), expected, atol=1e-4, rtol=1e-4)
        mask = src_mask(src, PAD)
        memory = model.encode(src, mask)
        full = model.decode(tgt_in, memory, mask, causal_mask(6, src.device))
        cache = KVCache()
        steps = [model.decode(tgt_in[:, t : t + 1], memory, mask, None, cache=cache) for t in range(6)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-4, rtol=1e-4)


def test_bf16_autocast_training_step_is_finite(make_model, tokens):
    model = make_model(dropout=0.1).cuda().train()
    src, tgt_in = tokens(4, 9).cuda(), tokens(4, 7, seed=1).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(src, tgt_in)
    loss, nll = label_smoothed_nll_loss(logits, tgt_in, 0.1, PAD)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(nll)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_chunked_loss_on_gpu_under_bf16_is_as_accurate_as_the_plain_loss():
    import torch.nn.functional as F

    from aiayn.train.chunked_loss import chunked_label_smoothed_nll_loss

    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(512, 64, generator=g).cuda().requires_grad_()
    weight = (torch.randn(3000, 64, generator=g) * 0.125).cuda().requires_grad_()
    target = torch.randint(1, 3000, (512,), generator=g).cuda()
    truth, _ = label_smoothed_nll_loss(F.linear(hidden.double(), weight.double()), target, 0.1, PAD)
    true_grads = torch.autograd.grad(truth, (hidden, weight))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        plain, _ = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, PAD)
        chunked, _ = chunked_label_smoothed_nll_loss(hidden, weight, target, 0.1, PAD, 100)
    for c, p, t in zip(
        torch.autograd.grad(chunked, (hidden, weight)), torch.autograd.grad(plain, (hidden, weight)), true_grads
    ):
        assert (c - t).norm() <= 1.5 * (p - t).norm() + 1e-6 * t.norm()
    assert abs(chunked - truth) <= 1.5 * abs(plain - truth) + 1e-3 * abs(truth)
