"""train.compile: torch.compile traces the model once per kind of shape, without graph breaks, and computes the same.

Batches vary in size and length every step, so a compiled model that specialised on each shape would recompile
all run long. Dynamo marks a dimension dynamic when it first sees it change, so after warm-up the graphs are: the
first static one, one dynamic one, and one per size-1 dimension (a batch of one long sentence, a one-token target),
which it specialises. Checked with the eager backend (Dynamo's tracing without Inductor's code generation).
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.train.label_smoothing import label_smoothed_nll_loss

SHAPES = [
    (16, 24, 25),
    (80, 5, 7),
    (30, 13, 12),
    (1, 60, 70),
    (12, 33, 1),
    (7, 2, 9),
    (40, 10, 10),
    (3, 41, 38),
    (1, 70, 62),
    (9, 3, 1),
    (64, 6, 6),
]  # (sentences, source length, target length)


def _batch(gen: torch.Generator, sentences: int, src_len: int, tgt_len: int):
    src = torch.randint(4, 100, (sentences, src_len), generator=gen)
    src[0, src_len - 1 :] = 0  # a padded position
    tgt = torch.randint(4, 100, (sentences, tgt_len + 1), generator=gen)
    return src, tgt[:, :-1], tgt[:, 1:]


def test_varying_batch_shapes_compile_a_bounded_number_of_graphs_and_match_eager():
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    eager = Transformer(ModelConfig(n_layers=1, d_model=32, d_ff=64, n_heads=2, d_k=16, d_v=16, dropout=0.0), 100, 0)
    compiled = Transformer(ModelConfig(n_layers=1, d_model=32, d_ff=64, n_heads=2, d_k=16, d_v=16, dropout=0.0), 100, 0)
    compiled.load_state_dict(eager.state_dict())
    compiled.compile(backend="eager")  # as stages/train.py does for train.compile, without code generation
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for shape in SHAPES:
        src, tgt_in, tgt_out = _batch(gen, *shape)
        losses = []
        for model in (eager, compiled):
            model.zero_grad()
            loss, _ = label_smoothed_nll_loss(model(src, tgt_in), tgt_out, 0.1, 0)
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-5)
        for p, q in zip(compiled.parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
        graphs.append(counters["stats"]["unique_graphs"])
    assert not counters["graph_break"], dict(counters["graph_break"])
    # static, dynamic, batch of one, target of one; then nothing new however the shapes vary
    assert graphs[-1] <= 4
    assert graphs[-1] == graphs[5], graphs


def _module_and_batches():

    from aiayn.config.schema import TrainConfig
    from aiayn.train.module import TranslationModule

    model = dict(n_layers=1, d_model=32, d_ff=64, n_heads=2, d_k=16, d_v=16, dropout=0.0)

    def make() -> TranslationModule:
        return TranslationModule(ModelConfig(**model), TrainConfig(), vocab_size=100, pad_id=0)

    torch.manual_seed(0)
    plain = make()
    compiled = make()
    compiled.load_state_dict(plain.state_dict())
    gen = torch.Generator().manual_seed(1)
    batches = []
    for shape in SHAPES[:6]:
        src, tgt_in, tgt_out = _batch(gen, *shape)
        batches.append(dict(src=src, tgt_in=tgt_in, tgt_out=tgt_out))
    return plain, compiled, batches


def _same_losses_and_gradients(plain, compiled, batches):
    for batch in batches:
        results = []
        for module in (plain, compiled):
            module.zero_grad()
            loss, nll = module._losses(batch, 0.1)
            loss.backward()
            results.append((loss.detach(), nll.detach(), [p.grad.clone() for p in module.parameters()]))
        (loss_a, nll_a, grads_a), (loss_b, nll_b, grads_b) = results
        torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(nll_b, nll_a, rtol=1e-5, atol=1e-4)
        for g, h in zip(grads_b, grads_a):
            torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-5)


def test_compile_step_traces_model_and_loss_together_with_the_same_result():
    torch._dynamo.reset()
    counters.clear()
    plain, compiled, batches = _module_and_batches()
    compiled.compile_step(backend="eager")
    _same_losses_and_gradients(plain, compiled, batches)
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert 0 < counters["stats"]["unique_graphs"] <= 4
    assert set(compiled.state_dict()) == set(plain.state_dict())  # checkpoints keep their keys


@pytest.mark.slow
def test_compile_step_with_inductor_generates_code_that_computes_the_same():
    torch._dynamo.reset()
    plain, compiled, batches = _module_and_batches()
    compiled.compile_step()  # Inductor: the fused kernels a GPU run gets, here as C++
    _same_losses_and_gradients(plain, compiled, batches[:3])
