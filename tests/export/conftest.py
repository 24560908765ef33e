"""A real smoke run for the export tests, trained once per session (tests/integration/pipeline/smoke.py's stages: fetch,
bpe, train, evaluate, as DVC runs them, in a temporary folder), our greedy outputs on its dev set, and its exports.

The smoke scale's 12 updates at its peak learning rate teach a model one token ("enenen..." on every line, or an
empty line once it has learned EOS): the greedy outputs would all be alike and say nothing about an export. These
runs train 600 updates at half the learning rate (warm-up 40), past the point where the model learns EOS, and decode
with no extra length (decode.max_len_b=0: an output may be as long as its source), so that the dev set's greedy
outputs are varied and split between ending at EOS and running to their limit. Shorter training sits on the edge
of learning EOS, where the float path decides: 200 updates at a quarter of the rate gave 3 distinct outputs, all
ending at EOS, on one machine and 36 of 40 at their limit with another seed; this setting gave 15-25 of 40 each way
and 17-22 distinct outputs over seeds 1-3 (AMD EPYC, AVX-512). Snapshots every 10 updates, so that Table 2's average
of the last 5 (the exported weights) averages neighbouring weights.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig
from tests.integration.pipeline.smoke import overrides, stage

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.data.tokenizer import Tokenizer
from aiayn.decode.search import output_limits, search
from aiayn.inference.trained import open_run
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer

TRAINING = (
    "train.max_steps=600",
    "train.warmup_steps=40",
    "train.lr_factor=0.5",
    "train.ckpt_every_steps=10",
    "train.val_every_steps=200",
    "decode.max_len_b=0",
)
TOLERANCE = 1e-4  # relative, float32: the brief's; measured ~3e-7 (HF logits) and ~2e-6 (CTranslate2 log-probs)


@dataclass(frozen=True)
class SmokeRun:
    """A finished smoke run opened as the export opens it (aiayn.inference.trained.open_run: Table 2's averaged
    weights), its dev set, our greedy outputs on it (max_len_b: the run's decode.max_len_b) and each output's length
    limit."""

    tmp: Path
    run_dir: Path
    cfg: DictConfig
    model: Transformer
    tokenizer: Tokenizer
    checkpoints: list[str]
    sources: list[str]
    references: list[str]
    greedy: list[list[int]]
    limits: list[int]

    @property
    def source_ids(self) -> list[list[int]]:
        """Each dev source's ids ending in EOS, as the model reads them."""
        return [ids + [self.tokenizer.eos_id] for ids in self.tokenizer.encode(self.sources)]

    def by_limit(self) -> dict[int, list[int]]:
        """The dev sentences' indices grouped by their output length limit (a batch shares one limit elsewhere)."""
        groups: dict[int, list[int]] = defaultdict(list)
        for index, limit in enumerate(self.limits):
            groups[limit].append(index)
        return dict(groups)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> SmokeRun:
    tmp = tmp_path_factory.mktemp("export")
    stage("fetch").run(prepare(compose(overrides(tmp))))
    stage("bpe").run(prepare(compose(overrides(tmp))))
    stage("train").run(prepare(compose(overrides(tmp, *TRAINING))))
    stage("evaluate").run(prepare(compose(overrides(tmp, *TRAINING))))
    (run_dir,) = [path.parent for path in (tmp / "runs").glob("base/**/train.json")]
    opened = open_run(run_dir)
    model = opened.model.cpu().float().eval()
    raw = tmp / "data" / "raw"
    sources = (raw / "valid.src").read_text(encoding="utf-8").splitlines()
    references = (raw / "valid.tgt").read_text(encoding="utf-8").splitlines()
    max_len_b = int(opened.cfg.decode.max_len_b)
    greedy = search(model, opened.tokenizer, sources, strategy="greedy", beam_size=1, alpha=0.0, max_len_b=max_len_b)
    lengths = [len(ids) for ids in opened.tokenizer.encode(sources)]
    return SmokeRun(
        tmp=tmp,
        run_dir=run_dir,
        cfg=opened.cfg,
        model=model,
        tokenizer=opened.tokenizer,
        checkpoints=[p.name for p in opened.checkpoints],
        sources=sources,
        references=references,
        greedy=greedy,
        limits=output_limits(lengths, max_len_b, model.cfg.max_positions),
    )


def export_with_cli(smoke_run: SmokeRun, name: str, *args: str) -> Path:
    """`aiayn-export RUN_DIR OUT *args` (its main()) into the run's temporary folder; OUT."""
    from aiayn.export.cli import main

    out = smoke_run.tmp / "exported" / name
    assert main([str(smoke_run.run_dir), str(out), *args]) == 0
    return out


@pytest.fixture(scope="session")
def hf_dir(smoke_run) -> Path:
    pytest.importorskip("transformers")
    return export_with_cli(smoke_run, "hf", "--to", "hf")


@pytest.fixture(scope="session")
def ct2_dir(smoke_run) -> Path:
    pytest.importorskip("ctranslate2")
    return export_with_cli(smoke_run, "ct2", "--to", "ct2")


@pytest.fixture(scope="session")
def ct2_int8_dir(smoke_run) -> Path:
    pytest.importorskip("ctranslate2")
    return export_with_cli(smoke_run, "ct2-int8", "--to", "ct2", "--quantization", "int8")


def random_model(seed: int = 0, vocab_size: int = 40, **overrides) -> Transformer:
    """A small Transformer with every parameter drawn at random, biases and LayerNorms included (the default init
    leaves biases 0 and LayerNorms 1, where a wrong permutation of them would go unseen); eval mode."""
    torch.manual_seed(seed)
    shape = dict(n_layers=2, d_model=16, d_ff=24, n_heads=4, d_k=4, d_v=4, dropout=0.0, max_positions=64)
    model = Transformer(ModelConfig(**(shape | overrides)), vocab_size, 0)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.5)
    return model.eval()


def random_batch(vocab_size: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Three right-padded sources ending in EOS (3) and three targets from BOS (2), no special ids inside."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab_size, (3, 11), generator=gen)
    tgt = torch.randint(4, vocab_size, (3, 8), generator=gen)
    for row, length in enumerate((11, 7, 4)):
        src[row, length - 1] = 3
        src[row, length:] = 0
    tgt[:, 0] = 2
    return src, tgt
