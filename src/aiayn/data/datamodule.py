"""LightningDataModule over encoded splits: token-count batches (section 5.1), resumable mid-epoch."""

from __future__ import annotations

from pathlib import Path

import lightning as L
from torch.utils.data import DataLoader

from aiayn.config.schema import BATCH_BUDGETS, BATCH_ORDERS
from aiayn.data.batching import Collater, TokenBatchSampler
from aiayn.data.binary import EncodedSplit
from aiayn.data.tokenizer import Tokenizer
from aiayn.run import folders


class TranslationDataModule(L.LightningDataModule):
    """Loads `{bpe_dir}/{split}` encoded splits and `{bpe_dir}/spm.model`; batches of about `max_tokens` tokens.

    Batches: `src` (B, S), `tgt_in` = BOS + y (B, T), `tgt_out` = y + EOS (B, T), all padded with `pad_id`;
    `n_src_tokens`/`n_tgt_tokens` count non-pad positions of `src`/`tgt_out`; `ids` are example indices.
    The sampler shards batches across DDP ranks itself: run the Trainer with `use_distributed_sampler=False`.
    """

    def __init__(
        self,
        bpe_dir,
        max_tokens: int,
        seed: int = 0,
        num_workers: int = 0,
        train_split: str = "train",
        val_split: str = "valid",
        val_max_tokens: int | None = None,
        length_bucket: int = 0,
        batch_order: str = BATCH_ORDERS[0],  # the schema's defaults (train.batch_order, train.batch_budget)
        batch_budget: str = BATCH_BUDGETS[0],
    ):
        super().__init__()
        self.batch_order = batch_order  # training batches' sort (aiayn.data.batching.ORDERS)
        self.batch_budget = batch_budget  # what training batches' max_tokens counts (aiayn.data.batching.BUDGETS)
        self.length_bucket = length_bucket  # lengths rounded up to a multiple of it, in batching and padding
        self.bpe_dir, self.max_tokens, self.seed, self.num_workers = Path(bpe_dir), max_tokens, seed, num_workers
        self.train_split, self.val_split = train_split, val_split
        self.val_max_tokens = val_max_tokens or max_tokens
        self.tokenizer: Tokenizer | None = None
        self.splits: dict[str, EncodedSplit] = {}
        self._sampler: TokenBatchSampler | None = None
        self._pending_state: dict | None = None
        self._consumed: tuple[int, int] | None = None  # (epoch, training batches that reached the model)

    @property
    def tokenizer_path(self) -> Path:
        return self.bpe_dir / folders.TOKENIZER

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is None:
            self.tokenizer = Tokenizer(self.tokenizer_path)
        for name in (self.train_split, self.val_split):
            if name not in self.splits:
                split = EncodedSplit(self.bpe_dir / name)
                split.check_tokenizer(self.tokenizer_path)
                self.splits[name] = split

    def _replicas(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def _loader(self, name: str, sampler: TokenBatchSampler) -> DataLoader:
        tok, split = self.tokenizer, self.splits[name]
        assert tok is not None, "setup() loads the tokenizer before any loader is made"
        return DataLoader(
            range(len(split)),  # type: ignore[arg-type]  # a range is a map-style dataset of the indices
            batch_sampler=sampler,
            num_workers=self.num_workers,
            collate_fn=Collater(split, tok.pad_id, tok.bos_id, tok.eos_id, self.length_bucket),
            persistent_workers=self.num_workers > 0,
        )

    def _make_sampler(self, name: str, max_tokens: int, shuffle: bool) -> TokenBatchSampler:
        split, (world, rank) = self.splits[name], self._replicas()
        # +1 on targets: the model sees BOS + y and predicts y + EOS.
        return TokenBatchSampler(
            split.src_lens,
            split.tgt_lens + 1,
            max_tokens,
            shuffle=shuffle,
            seed=self.seed,
            num_replicas=world,
            rank=rank,
            bucket=self.length_bucket,
            order=self.batch_order if shuffle else "longer",  # validation: fullest batches, in a fixed order
            budget=self.batch_budget if shuffle else "padded",  # validation: memory bounded
        )

    def train_dataloader(self) -> DataLoader:
        self.setup("fit")
        self._sampler = self._make_sampler(self.train_split, self.max_tokens, shuffle=True)
        if self._pending_state is not None:
            self._sampler.load_state_dict(self._pending_state)
        return self._loader(self.train_split, self._sampler)

    def val_dataloader(self) -> DataLoader:
        self.setup("validate")
        return self._loader(self.val_split, self._make_sampler(self.val_split, self.val_max_tokens, shuffle=False))

    def on_before_batch_transfer(self, batch, dataloader_idx: int):
        """Count training batches as they reach the model; worker prefetching makes the sampler run ahead."""
        trainer = self.trainer
        if trainer is not None and trainer.training and self._sampler is not None:
            epoch = self._sampler.epoch
            done = self._consumed[1] if self._consumed and self._consumed[0] == epoch else 0
            self._consumed = (epoch, done + 1)
        return batch

    def state_dict(self) -> dict:
        """Epoch and batches consumed in it; Lightning stores this in checkpoints."""
        if self._sampler is None:
            return dict(self._pending_state or {})
        state = self._sampler.state_dict()
        if self._consumed is not None:
            epoch, done = self._consumed
            state["batches_yielded"] = done if epoch == state["epoch"] else 0
        return state

    def load_state_dict(self, state: dict) -> None:
        self._pending_state = dict(state)
        self._consumed = (int(state["epoch"]), int(state["batches_yielded"]))
        if self._sampler is not None:
            self._sampler.load_state_dict(state)
