"""Positional encodings (section 3.5): relative offsets are linear maps; switches and limits are checked."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.model.embeddings import PositionalEncoding, TokenEmbedding, sinusoidal_table


def _offset_matrix(k: int, d_model: int) -> torch.Tensor:
    """M_k: block-diagonal 2x2 rotations by k * omega_i acting on each (sin, cos) pair, (D, D)."""
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        angle = k / 10000 ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return m


def test_table_matches_the_paper_formula():
    table = sinusoidal_table(50, 16, dtype=torch.float64)
    pos, i = 37, 3
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)), abs=1e-12)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)), abs=1e-12)


@pytest.mark.parametrize("k", [1, 3, 17, 100])
def test_shift_by_k_is_one_linear_map_for_all_positions(k):
    length, d_model = 400, 32
    table = sinusoidal_table(length + k, d_model, dtype=torch.float64)  # (P, D)
    m_k = _offset_matrix(k, d_model)
    torch.testing.assert_close(table[k:], table[:length] @ m_k.T, atol=1e-10, rtol=0)
    # The map depends on k: the matrix for another offset does not shift by k.
    assert not torch.allclose(table[k:], table[:length] @ _offset_matrix(k + 1, d_model).T, atol=1e-3)


def test_module_table_is_float32_copy_and_offsets_continue():
    pe = PositionalEncoding("sinusoidal", 16, 64)
    torch.testing.assert_close(pe(5, offset=10)[0], sinusoidal_table(64, 16)[10:15])
    assert "table" not in pe.state_dict()


def test_learned_and_none():
    learned = PositionalEncoding("learned", 8, 20)
    assert learned(4).shape == (1, 4, 8) and learned.table.requires_grad
    assert PositionalEncoding("none", 8, 20)(4) is None


def test_bad_kind_odd_dimensions_and_positions_beyond_max_are_errors():
    """The kind and the dimensions are checked once, by the model's config (which the Transformer runs)."""
    from aiayn.model.config import ModelConfig, check

    with pytest.raises(ValueError, match="pos_encoding='relative' is not one of"):
        check(ModelConfig(pos_encoding="relative"))
    with pytest.raises(ValueError, match="d_model=7 must be even for sinusoidal"):
        check(ModelConfig(d_model=7))
    with pytest.raises(ValueError, match="max_positions=20"):
        PositionalEncoding("sinusoidal", 8, 20)(5, offset=16)


def test_shared_embedding_scales_by_sqrt_d_model_and_projects_with_the_same_weight():
    emb = TokenEmbedding(11, 16)
    tokens = torch.tensor([[3, 5]])
    torch.testing.assert_close(emb(tokens)[0, 1], emb.weight[5] * 4.0)
    x = torch.randn(1, 2, 16)
    torch.testing.assert_close(emb.project(x), x @ emb.weight.T)
