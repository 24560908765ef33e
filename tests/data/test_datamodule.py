"""TranslationDataModule: batch layout, deterministic validation, and epoch order + mid-epoch resume in Lightning."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from aiayn.data import synthetic
from aiayn.data.binary import encode_split
from aiayn.data.datamodule import TranslationDataModule
from aiayn.data.tokenizer import Tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    raw, bpe = tmp_path_factory.mktemp("raw"), tmp_path_factory.mktemp("bpe")
    synthetic.write_corpus(raw, {"train": 300, "valid": 40}, seed=11)
    model = train_tokenizer([raw / "train.src", raw / "train.tgt"], bpe / "spm", vocab_size=300)
    tok = Tokenizer(model)
    for split in ("train", "valid"):
        encode_split(tok, raw / f"{split}.src", raw / f"{split}.tgt", bpe / split, tokenizer_path=model)
    return bpe


def test_batch_layout(bpe_dir):
    dm = TranslationDataModule(bpe_dir, max_tokens=400)
    dm.setup("fit")
    split, tok = dm.splits["train"], dm.tokenizer
    batch = next(iter(dm.train_dataloader()))
    src, tgt_in, tgt_out = batch["src"], batch["tgt_in"], batch["tgt_out"]
    assert src.dtype == tgt_in.dtype == torch.long and tgt_in.shape == tgt_out.shape
    assert batch["n_tgt_tokens"] <= 400  # the default budget counts real target tokens (BOS/EOS included)
    assert batch["n_src_tokens"] == int((src != tok.pad_id).sum())
    assert batch["n_tgt_tokens"] == int((tgt_out != tok.pad_id).sum())
    assert (tgt_in[:, 0] == tok.bos_id).all()
    for row, i in enumerate(batch["ids"].tolist()):
        y = split.tgt(i).tolist()
        assert tgt_in[row, 1 : len(y) + 1].tolist() == y and tgt_out[row, : len(y) + 1].tolist() == y + [tok.eos_id]
        assert (tgt_out[row, len(y) + 1 :] == tok.pad_id).all()
    padded = TranslationDataModule(bpe_dir, max_tokens=400, batch_budget="padded")
    padded.setup("fit")
    for batch in padded.train_dataloader():
        assert batch["src"].numel() <= 400 and batch["tgt_in"].numel() <= 400  # this budget counts padding
        assert src[row, : split.src_lens[i]].tolist() == split.src(i).tolist()
        assert src[row, split.src_lens[i] - 1] == tok.eos_id


def test_validation_is_deterministic_and_complete(bpe_dir):
    dm = TranslationDataModule(bpe_dir, max_tokens=400, val_max_tokens=300)
    dm.setup("validate")
    first = [b["ids"].tolist() for b in dm.val_dataloader()]
    again = [b["ids"].tolist() for b in dm.val_dataloader()]
    assert first == again
    assert sorted(i for b in first for i in b) == list(range(40))


class _Recorder(L.LightningModule):
    """Smallest real LightningModule: one weight, records which examples each training step saw."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[tuple[int, list[int]]] = []

    def training_step(self, batch, batch_idx):
        self.seen.append((self.current_epoch, batch["ids"].tolist()))
        return (self.w * batch["src"].float().mean()).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def _fit(bpe_dir, root, num_workers, ckpt_path=None, every=None):
    dm = TranslationDataModule(bpe_dir, max_tokens=500, seed=3, num_workers=num_workers)
    callbacks = (
        [L.pytorch.callbacks.ModelCheckpoint(root, every_n_train_steps=every, save_top_k=-1, filename="{step}")]
        if every
        else []
    )
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        enable_checkpointing=bool(every),
        default_root_dir=root,
    )
    model = _Recorder()
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    return model.seen


@pytest.mark.parametrize("num_workers", [0, 2])
def test_epochs_differ_and_mid_epoch_resume_continues_the_same_order(bpe_dir, tmp_path, num_workers):
    full = _fit(bpe_dir, tmp_path, num_workers, every=3)
    by_epoch = [[ids for e, ids in full if e == epoch] for epoch in (0, 1)]
    for batches in by_epoch:  # every example exactly once per epoch
        assert sorted(i for b in batches for i in b) == list(range(300))
    assert by_epoch[0] != by_epoch[1]
    resumed = _fit(bpe_dir, tmp_path / "resume", num_workers, ckpt_path=tmp_path / "step=3.ckpt")
    assert resumed == full[3:]


def test_a_length_bucket_pads_to_its_multiples_and_leaves_the_loss_unchanged(bpe_dir):
    from aiayn.data.batching import Collater
    from aiayn.model.config import ModelConfig
    from aiayn.model.transformer import Transformer
    from aiayn.train.label_smoothing import label_smoothed_nll_loss

    dm = TranslationDataModule(bpe_dir, max_tokens=400, length_bucket=8, batch_budget="padded")
    dm.setup("fit")
    split, tok = dm.splits["train"], dm.tokenizer
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(n_layers=2, d_model=32, d_ff=64, n_heads=4, d_k=8, d_v=8, dropout=0.0), tok.vocab_size, tok.pad_id
    )
    plain = Collater(split, tok.pad_id, tok.bos_id, tok.eos_id)
    for _, batch in zip(range(5), dm.train_dataloader()):
        src, tgt_in = batch["src"], batch["tgt_in"]
        assert src.size(1) % 8 == 0 and tgt_in.size(1) % 8 == 0
        assert src.numel() <= 400 and tgt_in.numel() <= 400  # the budget counts the bucketed widths
        ref = plain(batch["ids"].tolist())
        assert (src.size(1), tgt_in.size(1)) == (-(-ref["src"].size(1) // 8) * 8, -(-ref["tgt_in"].size(1) // 8) * 8)
        assert (src[:, : ref["src"].size(1)] == ref["src"]).all() and (src[:, ref["src"].size(1) :] == tok.pad_id).all()
        assert batch["n_src_tokens"] == ref["n_src_tokens"] and batch["n_tgt_tokens"] == ref["n_tgt_tokens"]
        losses = []
        for b in (batch, ref):
            model.zero_grad()
            loss, _ = label_smoothed_nll_loss(model(b["src"], b["tgt_in"]), b["tgt_out"], 0.1, tok.pad_id)
            loss.backward()
            losses.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        # padded positions are masked out of attention and the loss: the same loss and gradients
        torch.testing.assert_close(losses[0][0], losses[1][0], rtol=1e-5, atol=1e-5)
        for g, h in zip(losses[0][1], losses[1][1]):
            torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-5)  # sums over ~400 tokens: float32 order
