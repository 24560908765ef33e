"""DDP keeps the paper's effective batch: 2 gloo processes with accumulation A train like 1 process with 2A."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.data.batching import TokenBatchSampler
from aiayn.data.binary import EncodedSplit
from aiayn.stages.train import batching
from aiayn.train.module import TranslationModule

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["trainer=cpu"], (1, 1024)),  # smoke: batch_tokens 1024 = max_tokens
        (["trainer=cpu", "train.max_tokens=256"], (4, 256)),
        (["trainer=ddp_cpu", "train.max_tokens=256"], (2, 256)),
        (["trainer=ddp_cpu", "train.max_tokens=256", "trainer.num_nodes=2"], (1, 256)),
        (["trainer=cpu", "train.max_tokens=256", "trainer.devices=auto"], (4, 256)),  # "auto" on CPU is one process
        # 4 micro-batches of at most 300: each gets 256, so the update is 1024 tokens, not 1200
        (["trainer=cpu", "train.max_tokens=300"], (4, 256)),
        # more devices than one update needs split it: 2 x 512, not 2 x 1024
        (["trainer=ddp_cpu"], (1, 512)),
        (["trainer=ddp_cpu", "trainer.num_nodes=3"], (1, 171)),  # ceil(1024 / 6): never fewer tokens than asked
    ],
)
def test_an_update_sees_batch_tokens_whatever_the_device_count(overrides: list[str], expected) -> None:
    cfg = prepare(compose(["scale=smoke", *overrides]))
    accumulate, micro = batching(cfg.trainer, cfg.train)
    assert (accumulate, micro) == expected
    world = (
        2 * (3 if "trainer.num_nodes=3" in overrides else 2 if "trainer.num_nodes=2" in overrides else 1)
        if "trainer=ddp_cpu" in overrides
        else 1
    )
    assert 1024 <= accumulate * micro * world < 1024 + accumulate * world


def test_gpu_device_lists_count_as_lightning_counts_them() -> None:
    if not torch.cuda.is_available():
        with pytest.raises(Exception, match="GPU|CUDA|cuda|gpu"):
            cfg = prepare(compose(["scale=smoke", "trainer=ddp"]))
            batching(cfg.trainer, cfg.train)
    else:
        cfg = prepare(compose(["scale=smoke", "trainer=gpu", "train.max_tokens=256"]))
        assert batching(cfg.trainer, cfg.train).accumulate == 4


def test_two_rank_shards_interleave_into_the_single_process_order(smoke_data: Path) -> None:
    """Why the DDP comparison below is exact: update k of 2 ranks x 1 micro-batch sees the same two batches as
    update k of 1 process x 2 micro-batches (batches 2k and 2k+1), as long as the epoch is not over."""
    split = EncodedSplit(smoke_data / "data" / "bpe" / "train")

    def make(world: int, rank: int) -> TokenBatchSampler:
        return TokenBatchSampler(split.src_lens, split.tgt_lens + 1, 512, seed=1, num_replicas=world, rank=rank)

    single = list(make(1, 0))
    rank0, rank1 = list(make(2, 0)), list(make(2, 1))
    interleaved = [b for pair in zip(rank0, rank1) for b in pair]
    # An odd count pads the 2-rank epoch with a repeat at the end: the first len(single) batches agree either way.
    assert len(interleaved) == len(single) + len(single) % 2 and interleaved[: len(single)] == single


def _weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return dict(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])


def _loss_on(ckpt: Path, batch: dict) -> float:
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    module = TranslationModule.from_hyperparameters(state["hyper_parameters"])
    module.load_state_dict(state["state_dict"])
    module.eval()
    with torch.no_grad():
        loss_sum, _ = module._losses(batch, 0.0)
    return float(loss_sum) / int(batch["n_tgt_tokens"])


def test_two_gloo_processes_match_one_process_with_twice_the_accumulation(
    smoke_data, smoke_overrides, sh, tmp_path: Path
) -> None:
    """Same data per update (see the interleave test), dropout 0, and both average the two micro-batch means:
    the runs differ only in float summation order (gloo's all-reduce against in-place accumulation).

    Excluded from the weight check: the q/k/v projection biases. The key bias has an exactly zero gradient (softmax
    ignores a constant added to every score), so Adam (eps 1e-9) turns its rounding noise into full-size steps in
    either run, differently; it cannot change any output, which the fixed-batch loss checks.
    """
    # keep_last 6: weight snapshots from step 2 on, so the weights are compared after 2 updates as well as 12.
    common = [*smoke_overrides, "model.dropout=0", "train.max_tokens=512", "train.max_steps=12", "train.keep_last=6"]
    script = str(REPO / "pipeline" / "train.py")
    sh([sys.executable, script, *common, f"paths.runs={tmp_path}/single"], cwd=tmp_path)
    sh([sys.executable, script, *common, "trainer=ddp_cpu", f"paths.runs={tmp_path}/ddp"], cwd=tmp_path)
    # The overrides make a variant of base (runs/base/dropout=0,max_tokens=512/seed1): find each run's folder.
    (single,), (ddp,) = (
        [p.parent for p in (tmp_path / name / "base").glob("*/seed1/train.json")] for name in ("single", "ddp")
    )
    s_json, d_json = (json.loads((run / "train.json").read_text()) for run in (single, ddp))
    assert (s_json["accumulate_grad_batches"], s_json["device"]["count"]) == (2, 1)
    assert (d_json["accumulate_grad_batches"], d_json["device"]["count"]) == (1, 2)
    assert s_json["steps"] == d_json["steps"] == 12

    from aiayn.data.datamodule import TranslationDataModule

    data = TranslationDataModule(smoke_data / "data" / "bpe", max_tokens=2048, seed=0)
    data.setup("validate")
    batch = next(iter(data.val_dataloader()))
    # Adam divides by sqrt(v), so summation-order noise in a tiny gradient grows to ~1e-5 after 2 updates; a
    # sharding or accumulation error would move weights by about one learning-rate step (~4e-2 here).
    for ckpt, atol in (("step-00000002.ckpt", 5e-5), ("last.ckpt", 5e-4)):
        w_single, w_ddp = _weights(single / "checkpoints" / ckpt), _weights(ddp / "checkpoints" / ckpt)
        for name, value in w_single.items():
            if not name.endswith("w_qkv.bias"):
                torch.testing.assert_close(w_ddp[name], value, rtol=0, atol=atol, msg=f"{ckpt} {name}")
        losses = [_loss_on(run / "checkpoints" / ckpt, batch) for run in (single, ddp)]
        assert np.isclose(losses[0], losses[1], rtol=1e-4), (ckpt, losses)
    start, end = _weights(single / "checkpoints" / "step-00000002.ckpt"), _weights(single / "checkpoints" / "last.ckpt")
    assert max(float((end[k] - v).abs().max()) for k, v in start.items()) > 1e-2  # it trained: not two inits
