"""The one mask convention: boolean, True = may attend."""

from __future__ import annotations

import pytest
import torch

from aiayn.model.masks import causal_mask, offset_causal_mask, src_mask, tgt_mask


def test_src_mask_marks_non_pad_keys():
    src = torch.tensor([[5, 6, 0], [7, 0, 0]])
    assert src_mask(src, 0).tolist() == [[[[True, True, False]]], [[[True, False, False]]]]


def test_tgt_mask_is_causal_and_key_not_pad():
    tgt_in = torch.tensor([[1, 4, 0]])
    expected = [[True, False, False], [True, True, False], [True, True, False]]
    assert tgt_mask(tgt_in, 0)[0, 0].tolist() == expected
    assert causal_mask(3)[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_offset_causal_mask_continues_the_causal_pattern():
    full = causal_mask(5)[0, 0]
    assert torch.equal(offset_causal_mask(2, 3)[0, 0], full[3:])


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="src"):
        src_mask(torch.zeros(3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="positive"):
        causal_mask(0)
