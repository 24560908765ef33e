"""The chunked output projection + loss (train.loss_chunk_tokens) is the plain loss: values, gradients, training."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from aiayn.config.schema import TrainConfig
from aiayn.model.config import ModelConfig
from aiayn.train.chunked_loss import chunked_label_smoothed_nll_loss
from aiayn.train.label_smoothing import label_smoothed_nll_loss, smoothed_nll_from_lprobs, smoothed_nll_grad


def _inputs(n=37, d=16, vocab=53, pad_id=0, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, n, d, generator=g, dtype=dtype, requires_grad=True)  # (B, T, D)
    weight = (torch.randn(vocab, d, generator=g, dtype=dtype) * 0.5).requires_grad_()  # (V, D)
    target = torch.randint(1, vocab, (3, n), generator=g)
    target[0, -5:] = pad_id  # padded tail
    target[2, :3] = pad_id
    return hidden, weight, target


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.4])
@pytest.mark.parametrize("chunk", [1, 7, 37, 1000])
@pytest.mark.parametrize("pad_id", [0, 5])
@pytest.mark.parametrize("skip_pad", [False, True], ids=["all", "skip_pad"])
def test_loss_and_gradients_equal_the_plain_loss(epsilon, chunk, pad_id, skip_pad):
    hidden, weight, target = _inputs(pad_id=pad_id)
    loss, nll = label_smoothed_nll_loss(F.linear(hidden, weight), target, epsilon, pad_id)
    g_hidden, g_weight = torch.autograd.grad(loss, (hidden, weight))
    c_loss, c_nll = chunked_label_smoothed_nll_loss(hidden, weight, target, epsilon, pad_id, chunk, skip_pad)
    c_hidden, c_weight = torch.autograd.grad(3.0 * c_loss, (hidden, weight))  # an upstream gradient other than 1
    torch.testing.assert_close(c_loss, loss.float(), rtol=1e-6, atol=0)
    torch.testing.assert_close(c_nll, nll.float(), rtol=1e-6, atol=0)
    torch.testing.assert_close(c_hidden, 3.0 * g_hidden, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(c_weight, 3.0 * g_weight, rtol=1e-5, atol=1e-6)
    assert not c_nll.requires_grad
    assert c_hidden[0, -5:].abs().max() == 0  # pad targets give nothing


def test_the_gradient_formula_is_the_autograd_gradient_of_the_loss():
    logits = torch.randn(9, 11, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([1, 2, 3, 0, 4, 10, 9, 0, 5])
    lprobs = F.log_softmax(logits, dim=-1)
    loss, _ = smoothed_nll_from_lprobs(lprobs, target, 0.1, 0)
    (auto,) = torch.autograd.grad(loss, logits)
    torch.testing.assert_close(smoothed_nll_grad(lprobs.detach(), target, 0.1, 0), auto)


@pytest.mark.parametrize("skip_pad", [False, True], ids=["all", "skip_pad"])
def test_under_bf16_autocast_it_is_as_accurate_as_the_plain_loss(skip_pad):
    """Against the float64 truth, the chunked loss in bf16 autocast errs no more than the plain loss does."""
    hidden, weight, target = _inputs(n=64, d=32, vocab=200, dtype=torch.float32)
    truth_loss, _ = label_smoothed_nll_loss(F.linear(hidden.double(), weight.double()), target, 0.1, 0)
    truth = torch.autograd.grad(truth_loss, (hidden, weight))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, 0)
        c_loss, _ = chunked_label_smoothed_nll_loss(hidden, weight, target, 0.1, 0, 50, skip_pad)
    plain = torch.autograd.grad(loss, (hidden, weight))
    chunked = torch.autograd.grad(c_loss, (hidden, weight))
    assert chunked[0].dtype == hidden.dtype and chunked[1].dtype == weight.dtype
    assert abs(c_loss - truth_loss) <= 1.5 * abs(loss - truth_loss) + 1e-3 * abs(truth_loss)
    for c, p, t in zip(chunked, plain, truth):
        assert (c - t).norm() <= 1.5 * (p - t).norm() + 1e-6 * t.norm()
        assert (c - t).norm() < 0.02 * t.norm()


@pytest.mark.parametrize("skip_pad", [False, True], ids=["all", "skip_pad"])
def test_no_gradient_wanted_computes_none(skip_pad):
    hidden, weight, target = _inputs()
    with torch.no_grad():
        loss, _ = chunked_label_smoothed_nll_loss(hidden, weight, target, 0.1, 0, 8, skip_pad)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, 0)[0].float())


def test_bad_arguments_are_errors():
    hidden, weight, target = _inputs()
    with pytest.raises(ValueError, match="loss_chunk_tokens"):
        chunked_label_smoothed_nll_loss(hidden, weight, target, 0.1, 0, 0)
    with pytest.raises(ValueError, match="does not match"):
        chunked_label_smoothed_nll_loss(hidden, weight, target[:, 1:], 0.1, 0, 8)


def test_a_short_training_run_learns_the_same_curve():
    """Twenty updates of the training module with and without chunking, same weights and batches: the same
    losses step by step within float32 rounding, tied and untied output embeddings."""
    from aiayn.train.module import TranslationModule

    model = dict(n_layers=2, d_model=32, d_ff=64, n_heads=4, d_k=8, d_v=8, dropout=0.0)
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(20):
        tgt = torch.randint(1, 60, (6, 10), generator=g)
        tgt[:2, -3:] = 0
        batches.append(
            dict(
                src=torch.randint(1, 60, (6, 9), generator=g),
                tgt_in=tgt[:, :-1],
                tgt_out=tgt[:, 1:],
                n_tgt_tokens=int((tgt[:, 1:] != 0).sum()),
            )
        )

    def curve(chunk: int, share: str) -> list[float]:
        torch.manual_seed(0)
        train = TrainConfig(loss_chunk_tokens=chunk, warmup_steps=10, fused_adam=False)
        module = TranslationModule(ModelConfig(**model, share_embeddings=share), train, vocab_size=60, pad_id=0)
        setup = module.configure_optimizers()
        optimizer, schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
        losses = []
        for batch in batches:
            optimizer.zero_grad()
            loss_sum, _ = module._losses(batch, 0.1)
            (loss_sum / batch["n_tgt_tokens"]).backward()
            optimizer.step()
            schedule.step()
            losses.append(float(loss_sum.detach()) / batch["n_tgt_tokens"])
        return losses

    for share in ("all", "none"):
        plain, chunked = curve(0, share), curve(13, share)
        assert plain[-1] < plain[0] - 0.1  # it learns
        assert chunked == pytest.approx(plain, rel=1e-4)
