"""Fabricated run folders (real files on disk) for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

PAPER_ROWS = ("base", "A1", "A3", "C5", "D1", "big")  # rows the fabricated runs say they reproduce (row.paper)
TABLE2 = {"base": "Transformer (base model)", "big": "Transformer (big)"}
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "small",
    "birds",
    "sing",
    "in",
    "green",
    "old",
    "trees",
]


def reference_lines(n: int = 40) -> list[str]:
    """Deterministic, varied sentences of 6 to 13 words."""
    return [
        " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6 + i % 8)).capitalize() + "." for i in range(n)
    ]


def degrade(lines: list[str], every: int) -> list[str]:
    """Drop every `every`-th word of each line: a worse but related system."""
    return [" ".join(w for k, w in enumerate(line.split()) if (k + 1) % every) for line in lines]


def write_run(
    runs: Path,
    row: str,
    seed: int,
    *,
    dev_bleu: float | None,
    dev_ppl: float,
    hyps: list[str] | None = None,
    model: dict | None = None,
    write_eval: bool = True,
) -> Path:
    """One run folder with config.yaml, train.json, eval.json, hyps.valid.txt/hyps.test.txt and curve.csv."""
    path = runs / row / f"seed{seed}"
    path.mkdir(parents=True)
    model = model or dict(
        n_layers=1, d_model=16, d_ff=32, n_heads=2, d_k=8, d_v=8, dropout=0.1, pos_encoding="sinusoidal"
    )
    meta = dict(
        name=row,
        tables=["table2", "table3"] if row in TABLE2 else ["table3"],
        paper=dict(table3=row if row in PAPER_ROWS else None, table2=TABLE2.get(row)),
    )
    config = dict(
        row=meta,
        seed=seed,
        scale=dict(name="tiny"),
        data=dict(name="synthetic", src_lang="en", tgt_lang="de"),
        model=model,
        train=dict(label_smoothing=0.1, max_steps=10),
    )
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    train = dict(
        steps=10,
        tokens_seen=dict(src=1000, tgt=1100),
        wall_time_s=2.0,
        train_loss=3.0,
        val_loss=3.1,
        val_ppl=dev_ppl,
        params=123_456,
        vocab_size=50,
        device=dict(name="cpu", count=1, accelerator="cpu"),
        precision="32",
        float_path="AVX2 kernels, MKL_CBWR=AVX2, 1 thread",
    )
    (path / "train.json").write_text(json.dumps(train))
    if write_eval:
        ev = dict(
            beam_size=4,
            length_penalty=0.6,
            dev=dict(
                bleu=dev_bleu,
                bleu_paper=dev_bleu,
                ppl=dev_ppl,
                sacrebleu_signature="dev-sig",
                set=dict(name="d", lines=40),
                checkpoints_averaged=1,
                sentences_per_s=10.0,
            ),
        )
        if row in TABLE2:
            ev["test"] = dict(
                bleu=(dev_bleu or 0) - 1,
                sacrebleu_signature="sig",
                bleu_paper=dev_bleu,
                chrf=40.0,
                bleu_ci95=[0, 1],
                set=dict(name="t", lines=40),
                checkpoints_averaged=5,
                sentences_per_s=10.0,
            )
        (path / "eval.json").write_text(json.dumps(ev))
    if hyps is not None:
        for split in ("valid", "test"):
            (path / f"hyps.{split}.txt").write_text("\n".join(hyps) + "\n")
    (path / "curve.csv").write_text(
        f"step,train_loss,val_loss,val_ppl,train_lr\n1,5.0,,,0.001\n5,4.0,4.2,66.7,0.002\n10,3.0,3.1,{dev_ppl},0.003\n"
    )
    return path


@pytest.fixture(name="reference_lines")
def reference_lines_fixture():
    """The sentence generator, for tests (conftest modules cannot be imported under importlib mode)."""
    return reference_lines


@pytest.fixture(name="degrade")
def degrade_fixture():
    """The word-dropping degrader, for tests."""
    return degrade


@pytest.fixture
def fabricated(tmp_path: Path) -> dict:
    """runs/ with base, A1 (worse, as in the paper), C5 (worse, paper better), A3 (paper: no change),
    D1 (one good seed, one without eval.json, one missing folder), a user row "custom", plus references."""
    runs, refs = tmp_path / "runs", reference_lines()
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    for split in ("valid", "test"):
        (raw / f"{split}.tgt").write_text("\n".join(refs) + "\n")
        (raw / f"{split}.src").write_text("\n".join(refs) + "\n")
    base_hyps = degrade(refs, 5)
    for seed, (bleu, ppl) in zip((1, 2, 3), ((30.0, 5.0), (31.0, 4.9), (29.5, 5.1))):
        write_run(runs, "base", seed, dev_bleu=bleu, dev_ppl=ppl, hyps=base_hyps)
        write_run(runs, "A1", seed, dev_bleu=bleu - 2.0 + 0.1 * seed, dev_ppl=ppl + 0.4, hyps=degrade(refs, 2))
        write_run(runs, "C5", seed, dev_bleu=bleu - 1.0 - 0.2 * seed, dev_ppl=ppl + 0.2, hyps=degrade(refs, 3))
        write_run(runs, "A3", seed, dev_bleu=bleu, dev_ppl=ppl, hyps=base_hyps)
        write_run(runs, "custom", seed, dev_bleu=bleu + 0.5, dev_ppl=ppl, hyps=base_hyps)
    write_run(runs, "D1", 1, dev_bleu=28.0, dev_ppl=6.0, hyps=degrade(refs, 4))
    write_run(runs, "D1", 2, dev_bleu=28.0, dev_ppl=6.0, write_eval=False)
    return dict(
        runs=runs,
        refs={"valid": raw / "valid.tgt", "test": raw / "test.tgt"},
        seeds=[1, 2, 3],
        rows=["base", "A1", "A3", "C5", "D1", "custom"],
        out=tmp_path / "results",
    )
