"""Key/value cache for incremental decoding, reorderable along the batch for beam search.

Dimensions: B batch (sentences x beams), H heads, L cached target positions, S source length,
d_k key size, d_v value size.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

KV = tuple[Tensor, Tensor]


class KVCache:
    """Per decoder layer: self-attention K/V of all target positions so far, and encoder-decoder K/V.

    Created empty by search code and filled by `Transformer.decode`; `reorder` follows the beams.
    """

    def __init__(self) -> None:
        self._self_kv: dict[int, KV] = {}  # layer -> (B, H, L, d_k), (B, H, L, d_v)
        self._cross_kv: dict[int, KV] = {}  # layer -> (B, H, S, d_k), (B, H, S, d_v)

    @property
    def length(self) -> int:
        """Number of target positions cached (read from the first layer, which is written first)."""
        return self._self_kv[0][0].size(-2) if 0 in self._self_kv else 0

    def __len__(self) -> int:
        return self.length

    def append_self(self, layer: int, k: Tensor, v: Tensor) -> KV:
        """Append the new positions' self-attention K/V of one layer; return all positions' K/V."""
        if layer in self._self_kv:
            old_k, old_v = self._self_kv[layer]
            k, v = _cat_time(old_k, k), _cat_time(old_v, v)
        self._self_kv[layer] = (k, v)
        return k, v

    def cross(self, layer: int, compute: Callable[[], KV]) -> KV:
        """Encoder-decoder K/V of one layer: computed by `compute` on the first step, then reused."""
        if layer not in self._cross_kv:
            self._cross_kv[layer] = compute()
        return self._cross_kv[layer]

    def reorder(self, index: Tensor) -> None:
        """Select `index` (LongTensor, may repeat or shrink) along the batch of every cached tensor."""
        for store in (self._self_kv, self._cross_kv):
            for layer, (k, v) in store.items():
                store[layer] = (k.index_select(0, index.to(k.device)), v.index_select(0, index.to(v.device)))


def _cat_time(old: Tensor, new: Tensor) -> Tensor:
    """Concatenate along the time axis (B, H, L, d) + (B, H, L_new, d) -> (B, H, L + L_new, d)."""
    if old.size(0) != new.size(0):
        raise ValueError(
            f"cache batch {old.size(0)} != new tokens' batch {new.size(0)}; call KVCache.reorder when beams change"
        )
    return torch.cat([old, new], dim=-2)
