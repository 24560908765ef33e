"""Key/value cache for incremental decoding, reorderable along the batch for beam search.

Dimensions: B batch (sentences x beams), n sentences, G = B / n rows per sentence (beams), H heads, L cached
target positions, S source length, d_k key size, d_v value size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

KV = tuple[Tensor, Tensor]


class KVCache:
    """Per decoder layer: self-attention K/V of all target positions so far, and encoder-decoder K/V.

    Created empty by search code and filled by `Transformer.decode`; `reorder` follows the beams.

    With `group` G > 1 the decoded rows come in groups of G consecutive rows (the beams of one sentence) that share
    one source sentence: `decode` is then given `memory` and `src_mask` per sentence, (n, S, D) and (n, 1, 1, S),
    and the encoder-decoder K/V are computed, stored and attended once per sentence, its G rows' queries together.
    Beam search then never copies them when beams change parents, only when sentences leave the batch.
    """

    def __init__(self, group: int = 1) -> None:
        if group < 1:
            raise ValueError(f"KVCache group must be >= 1 rows per sentence, got {group}")
        self.group = group
        self._self_kv: dict[int, _Growing] = {}  # layer -> (B, H, L, d_k), (B, H, L, d_v)
        self._cross_kv: dict[int, KV] = {}  # layer -> (n, H, S, d_k), (n, H, S, d_v)

    @property
    def length(self) -> int:
        """Number of target positions cached (read from the first layer, which is written first)."""
        return self._self_kv[0].length if 0 in self._self_kv else 0

    def __len__(self) -> int:
        return self.length

    def append_self(self, layer: int, k: Tensor, v: Tensor) -> KV:
        """Append the new positions' self-attention K/V of one layer; return all positions' K/V."""
        if layer not in self._self_kv:
            self._self_kv[layer] = _Growing(k, v)
            return k, v
        return self._self_kv[layer].append(k, v)

    def cross(self, layer: int, compute: Callable[[], KV]) -> KV:
        """Encoder-decoder K/V of one layer, one row per sentence: computed by `compute` on the first step, then
        reused."""
        if layer not in self._cross_kv:
            self._cross_kv[layer] = compute()
        return self._cross_kv[layer]

    def reorder(self, index: Tensor, sentences: Tensor | None = None) -> None:
        """Select rows `index` (LongTensor, may repeat or shrink) of the self-attention K/V, and sentences
        `sentences` of the encoder-decoder K/V.

        With group 1 rows are sentences, and `sentences` defaults to `index`. With a larger group, `sentences`
        None means every sentence stays and `index` moves rows only among their own sentence's G rows (beams
        following their parents); otherwise `index` must list the G rows of each kept sentence, in its order.
        """
        if sentences is None and self.group == 1:
            sentences = index
        for slot in self._self_kv.values():
            slot.reorder(index)
        if sentences is not None:
            for layer, (k, v) in self._cross_kv.items():
                self._cross_kv[layer] = (
                    k.index_select(0, sentences.to(k.device)),
                    v.index_select(0, sentences.to(v.device)),
                )


class _Growing:
    """One layer's self-attention K/V in preallocated buffers, so that a decoding step copies the cache once
    (selecting the beams' parents, into a second buffer) instead of twice (selecting, then concatenating the new
    position). The time axis grows by doubling; rows shrink in place as sentences leave.

    The K/V returned are views of the first `length` positions of the `rows` rows in use.
    """

    MIN_CAPACITY = 16

    def __init__(self, k: Tensor, v: Tensor) -> None:
        self.rows, self.length = k.size(0), k.size(-2)
        capacity = max(self.MIN_CAPACITY, 2 * self.length)
        self.buffers = [self._allocate(k, v, self.rows, capacity) for _ in range(2)]
        self._write(k, v)

    @staticmethod
    def _allocate(k: Tensor, v: Tensor, rows: int, capacity: int) -> KV:
        return (k.new_empty(rows, k.size(1), capacity, k.size(3)), v.new_empty(rows, v.size(1), capacity, v.size(3)))

    def _write(self, k: Tensor, v: Tensor) -> None:
        start = self.length - k.size(-2)
        for buffer, new in zip(self.buffers[0], (k, v)):
            buffer[: self.rows, :, start : self.length] = new

    def _views(self, buffers: KV, rows: int) -> KV:
        return buffers[0][:rows, :, : self.length], buffers[1][:rows, :, : self.length]

    def append(self, k: Tensor, v: Tensor) -> KV:
        if k.size(0) != self.rows:
            raise ValueError(
                f"cache batch {self.rows} != new tokens' batch {k.size(0)}; call KVCache.reorder when beams change"
            )
        old = self.length
        self.length += k.size(-2)
        if self.length > self.buffers[0][0].size(-2):  # grow: the new buffers take the old positions
            capacity = max(2 * self.buffers[0][0].size(-2), self.length)
            grown = [self._allocate(k, v, self.rows, capacity) for _ in range(2)]
            for target, source in zip(grown[0], self.buffers[0]):
                target[: self.rows, :, :old] = source[: self.rows, :, :old]
            self.buffers = grown
        self._write(k, v)
        return self._views(self.buffers[0], self.rows)

    def reorder(self, index: Tensor) -> None:
        rows = index.numel()
        current, spare = self.buffers
        if rows > spare[0].size(0):  # more rows than ever before (a caller repeating rows): a larger spare
            spare = self._allocate(current[0], current[1], rows, current[0].size(-2))
        index = index.to(current[0].device)
        for source, target in zip(self._views(current, self.rows), self._views(spare, rows)):
            torch.index_select(source, 0, index, out=target)
        self.buffers, self.rows = [spare, current], rows
