"""Label-smoothed NLL (section 5.4): eps = 0 is cross-entropy, sums decompose, the minimiser is smooth."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.train.label_smoothing import label_smoothed_nll_loss

PAD, V = 0, 11


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, V, generator=g) * 3
    target = torch.randint(1, V, (3, 5), generator=g)
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    return logits, target


def test_zero_smoothing_equals_cross_entropy_ignoring_pad():
    logits, target = _batch()
    loss, nll = label_smoothed_nll_loss(logits, target, 0.0, PAD)
    expected = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, expected)


def test_nll_sum_is_unsmoothed_and_loss_differs_when_smoothing():
    logits, target = _batch()
    loss, nll = label_smoothed_nll_loss(logits, target, 0.1, PAD)
    expected = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=PAD, reduction="sum")
    torch.testing.assert_close(nll, expected)
    assert not torch.isclose(loss, nll)


def test_padded_batch_equals_sum_of_sentences():
    logits, target = _batch()
    loss, nll = label_smoothed_nll_loss(logits, target, 0.1, PAD)
    parts = []
    for i in range(3):
        length = int((target[i] != PAD).sum())
        parts.append(label_smoothed_nll_loss(logits[i : i + 1, :length], target[i : i + 1, :length], 0.1, PAD))
    torch.testing.assert_close(loss, sum(p[0] for p in parts))
    torch.testing.assert_close(nll, sum(p[1] for p in parts))


def test_matches_explicit_smoothed_distribution_over_v_minus_2():
    logits, target = _batch()
    eps = 0.2
    q = torch.full((3, 5, V), eps / (V - 2))
    q[..., PAD] = 0.0
    q.scatter_(-1, target[..., None], 1 - eps)
    explicit = -(q * logits.log_softmax(-1)).sum(-1).masked_fill(target == PAD, 0).sum()
    torch.testing.assert_close(label_smoothed_nll_loss(logits, target, eps, PAD)[0], explicit)


@pytest.mark.parametrize("pad_id", [0, 4, V - 1])
def test_loss_is_minimised_by_the_smoothed_distribution(pad_id):
    eps = 0.1
    target = torch.tensor([3 if pad_id != 3 else 2])
    q = torch.full((1, V), eps / (V - 2))
    q[0, pad_id] = 1e-30  # pad's probability -> 0 (its logit -> -inf)
    q[0, target] = 1 - eps
    best = q.log().requires_grad_(True)
    loss, _ = label_smoothed_nll_loss(best, target, eps, pad_id)
    entropy = -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (V - 2))
    assert loss.item() == pytest.approx(entropy, rel=1e-5)  # the minimum of H(q, p) is H(q)
    loss.backward()
    assert best.grad.abs().max() < 1e-5  # stationary point
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        other = best.detach() + 0.3 * torch.randn(1, V, generator=g)
        assert label_smoothed_nll_loss(other, target, eps, pad_id)[0] > loss


def test_extreme_logits_stay_finite():
    logits, target = _batch()
    logits[..., PAD] = -1e30
    logits[0, 0, 5] = 1e4
    loss, nll = label_smoothed_nll_loss(logits, target, 0.1, PAD)
    assert torch.isfinite(loss) and torch.isfinite(nll)


def test_bad_arguments_are_errors():
    logits, target = _batch()
    with pytest.raises(ValueError, match="epsilon"):
        label_smoothed_nll_loss(logits, target, 1.0, PAD)
    with pytest.raises(ValueError, match="do not match"):
        label_smoothed_nll_loss(logits, target[:, :2], 0.1, PAD)
