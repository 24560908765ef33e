"""Token-count batches of similar-length pairs (section 5.1: "batched together by approximate sequence length").

Each batch holds about `max_tokens` tokens. What the budget (train.batch_budget) counts: real TARGET tokens alone
("target", the default: the sum of the target lengths, the tokens the loss averages over; the source side is not
budgeted), so every update sees the same number of predicted tokens, as a plain loop that counts the loss's tokens
does; padded positions ("padded": batch size x longest sequence, per side), so memory per step is bounded; or real
tokens per side ("real": the sum of the sentences' lengths, each side within the budget). A single example longer
than `max_tokens` forms a batch of its own rather than being dropped. Why the default: docs/departures.md#token-budget

Which length the sort puts first is `order` (train.batch_order): "source" (the default) sorts by (source, target), as
fairseq's LanguagePairDataset orders its indices, so target lengths vary within a batch; "longer" sorts by (longer
side, target, source), so a batch's target lengths are nearly equal. The budget is the same either way.

With a length bucket K (train.length_bucket), every length is rounded up to a multiple of K before sorting and
budgeting, and the collate pads each batch to those rounded lengths: a batch then has one of few shapes, which
compiled graphs and CUDA graphs reuse (fewest with order "longer" and budget "padded": a bucket's batches all hold
max_tokens // L sentences of padded length L; bench/data_pipeline.py counts them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from aiayn.config.schema import BATCH_BUDGETS, BATCH_ORDERS
from aiayn.run import folders

if TYPE_CHECKING:
    from aiayn.data.binary import EncodedSplit


def round_up(lengths, bucket: int):
    """Lengths (an int or an array) rounded up to a multiple of `bucket` (0 or 1: unchanged)."""
    return lengths if bucket <= 1 else -(-lengths // bucket) * bucket


def _greedy_batches(
    order: np.ndarray, src_lens: np.ndarray, tgt_lens: np.ndarray, max_tokens: int, budget: str = "padded"
) -> list:
    """Cut `order` (already length-sorted) into consecutive batches whose size fits `max_tokens`: padded positions
    (sentences x longest) or real tokens (the sum of lengths) on each side, or real target tokens alone, as `budget`
    says."""
    batches, start, size_s, size_t = [], 0, 0, 0
    src, tgt = src_lens[order].tolist(), tgt_lens[order].tolist()
    for i in range(len(order)):
        # Departure: see docs/departures.md#token-budget (what the budget counts, and the default's choice)
        if budget != "padded":  # running sums of real tokens: the target side alone ("target"), or each side
            s, t = size_s + src[i], size_t + tgt[i]
            over = (t if budget == "target" else max(s, t)) > max_tokens
        else:  # running maxima: the padded size is sentences x the longest
            s, t = max(size_s, src[i]), max(size_t, tgt[i])
            over = (i + 1 - start) * max(s, t) > max_tokens
        if i > start and over:
            batches.append(order[start:i])
            start, s, t = i, src[i], tgt[i]
        size_s, size_t = s, t
    if start < len(order):
        batches.append(order[start:])
    return batches


ORDERS, BUDGETS = BATCH_ORDERS, BATCH_BUDGETS  # the schema's train.batch_order and train.batch_budget


class TokenBatchSampler:
    """Length-bucketed, token-budgeted, seeded, resumable and DDP-sharded batch sampler.

    Each epoch: a (seed, epoch)-seeded permutation is cut into windows of `sort_window` examples, each window is
    sorted by length (rounded up to `bucket`; `order`: (max, tgt, src) or (src, tgt)) and cut into token-budgeted
    batches (`budget`: padded positions or real tokens per side, or real target tokens), and the batch order is
    shuffled. The epoch counter advances by itself on every new `__iter__` (Lightning does not call `set_epoch` on
    batch samplers).
    """

    def __init__(
        self,
        src_lens,
        tgt_lens,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int = 1,
        rank: int = 0,
        sort_window: int = 1 << 20,
        bucket: int = 0,
        order: str = "longer",
        budget: str = "padded",
    ):
        if order not in ORDERS:
            raise ValueError(f"batch order must be one of {ORDERS}, got {order!r}")
        if budget not in BUDGETS:
            raise ValueError(f"batch budget must be one of {BUDGETS}, got {budget!r}")
        if bucket < 0:
            raise ValueError(f"length bucket must be >= 0, got {bucket}")
        # Lengths as the batch's tensors will have them: rounded up to the bucket (the collate pads to it).
        self.src_lens = round_up(np.asarray(src_lens, dtype=np.int64), bucket)
        self.tgt_lens = round_up(np.asarray(tgt_lens, dtype=np.int64), bucket)
        if self.src_lens.shape != self.tgt_lens.shape:
            raise ValueError(f"src_lens {self.src_lens.shape} and tgt_lens {self.tgt_lens.shape} differ in length")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} not in [0, num_replicas={num_replicas})")
        self.max_tokens, self.shuffle, self.seed = int(max_tokens), shuffle, seed
        self.drop_last, self.num_replicas, self.rank, self.sort_window = drop_last, num_replicas, rank, sort_window
        self.order, self.budget = order, budget
        self.epoch, self._start, self._fresh = 0, 0, True
        self._cache: tuple[int, list] | None = None

    def _all_batches(self, epoch: int) -> list[np.ndarray]:
        """Every batch of `epoch` for all ranks, in the order they are served."""
        n = len(self.src_lens)
        rng = np.random.default_rng([self.seed, epoch])
        perm = rng.permutation(n) if self.shuffle else np.arange(n)
        batches = []
        for lo in range(0, n, self.sort_window):
            window = perm[lo : lo + self.sort_window]
            # "longer": by (max, tgt, src) length (the token budget binds on the longer side, so grouping by it
            # first gives the fullest batches); "source": by (src, tgt), fairseq's order. Ties keep the random
            # window order, so batches vary between epochs.
            s, t = self.src_lens[window], self.tgt_lens[window]
            keys = (s, t, np.maximum(s, t)) if self.order == "longer" else (t, s)
            window = window[np.lexsort(keys)]
            batches += _greedy_batches(window, self.src_lens, self.tgt_lens, self.max_tokens, self.budget)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def _rank_batches(self) -> list[np.ndarray]:
        """This rank's batches of the current epoch; every rank gets the same number."""
        if self._cache is None or self._cache[0] != self.epoch:
            batches = self._all_batches(self.epoch)
            r = self.num_replicas
            if self.drop_last:
                batches = batches[: len(batches) // r * r]
            elif len(batches) % r:  # pad by repeating the first batches, as DistributedSampler does
                batches += batches[: r - len(batches) % r]
            self._cache = (self.epoch, batches[self.rank :: r])
        return self._cache[1]

    def __len__(self) -> int:
        return len(self._rank_batches())

    def __iter__(self) -> Iterator[list[int]]:
        if not self._fresh:  # a new pass means a new epoch unless set_epoch/load_state_dict just positioned us
            self.epoch, self._start = self.epoch + 1, 0
        self._fresh = False
        batches = self._rank_batches()
        while self._start < len(batches):
            batch = batches[self._start]
            self._start += 1
            yield batch.tolist()

    def set_epoch(self, epoch: int) -> None:
        """Position at the start of `epoch` (keeps a resumed position when `epoch` is the current one)."""
        if epoch != self.epoch:
            self.epoch, self._start = epoch, 0
        self._fresh = True

    def state_dict(self) -> dict:
        """Epoch and batches already yielded in it (exact when batches are consumed as they are yielded)."""
        return {"epoch": self.epoch, "batches_yielded": self._start, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        if state["seed"] != self.seed:
            raise ValueError(f"sampler state has seed {state['seed']}, this sampler {self.seed}")
        self.epoch, self._start, self._fresh = int(state["epoch"]), int(state["batches_yielded"]), True


def padding_fraction(batches, src_lens, tgt_lens, bucket: int = 0) -> float:
    """Share of padded positions among all positions of the padded (B, S) and (B, T) tensors (with the collate's
    length bucket)."""
    src_lens, tgt_lens = np.asarray(src_lens), np.asarray(tgt_lens)
    real = padded = 0
    for b in batches:
        b = np.asarray(b)
        s, t = src_lens[b], tgt_lens[b]
        real += int(s.sum() + t.sum())
        padded += len(b) * (round_up(int(s.max()), bucket) + round_up(int(t.max()), bucket))
    return 1.0 - real / padded if padded else 0.0


class Collater:
    """Build one padded batch from example indices: numpy arrays first, one conversion to torch per tensor."""

    def __init__(self, split: EncodedSplit, pad_id: int, bos_id: int, eos_id: int, bucket: int = 0):
        self.split, self.pad_id, self.bos_id, self.eos_id, self.bucket = split, pad_id, bos_id, eos_id, bucket

    def __call__(self, indices: list[int]) -> dict:
        split, ids = self.split, np.asarray(indices, dtype=np.int64)
        src_lens, tgt_lens = split.src_lens[ids], split.tgt_lens[ids] + 1  # +1: BOS on tgt_in, EOS on tgt_out
        width_s, width_t = (round_up(int(lens.max()), self.bucket) for lens in (src_lens, tgt_lens))
        src = np.full((len(ids), width_s), self.pad_id, dtype=np.int64)  # (B, S)
        tgt_in = np.full((len(ids), width_t), self.pad_id, dtype=np.int64)  # (B, T)
        tgt_out = tgt_in.copy()
        tgt_in[:, 0] = self.bos_id
        for row, i in enumerate(ids):
            s, t = split.src(i), split.tgt(i)  # stored src already ends with EOS
            src[row, : len(s)] = s
            tgt_in[row, 1 : len(t) + 1] = t
            tgt_out[row, : len(t)] = t
            tgt_out[row, len(t)] = self.eos_id
        return dict(
            src=torch.from_numpy(src),
            tgt_in=torch.from_numpy(tgt_in),
            tgt_out=torch.from_numpy(tgt_out),
            n_src_tokens=int(src_lens.sum()),
            n_tgt_tokens=int(tgt_lens.sum()),
            ids=torch.from_numpy(ids),
        )


def eval_batches(bpe_dir: str | Path, name: str, tokenizer, max_tokens: int) -> Iterator[dict]:
    """The batches of `{bpe_dir}/{name}` in length order, encoded with `tokenizer` (`{bpe_dir}/spm.model`), without
    Lightning: the evaluate stage's dev PPL."""
    from aiayn.data.binary import EncodedSplit

    split = EncodedSplit(Path(bpe_dir) / name)
    split.check_tokenizer(Path(bpe_dir) / folders.TOKENIZER)
    collate = Collater(split, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    for ids in TokenBatchSampler(split.src_lens, split.tgt_lens + 1, max_tokens, shuffle=False):
        yield collate(ids)
