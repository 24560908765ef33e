"""The fetch and bpe stages: raw parallel text in, a joint subword model and encoded splits out."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from aiayn.io import atomic_write_json

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def fetch(cfg: DictConfig) -> dict[str, Any]:
    """Write data/raw/{train,valid,test}.{src,tgt} and stats.json for `cfg.data.name`."""
    d, out = cfg.data, Path(cfg.paths.raw)
    out.mkdir(parents=True, exist_ok=True)
    if d.name == "synthetic":
        from aiayn.data.synthetic import write_corpus

        sizes = {"train": d.train_size, "valid": d.valid_size, "test": d.test_size}
        write_corpus(out, sizes, seed=d.seed)
        stats = {
            "source": "synthetic",
            "seed": d.seed,
            "splits": {s: {"lines": _line_count(out / f"{s}.src"), "kept": _line_count(out / f"{s}.src")}
                       for s in SPLITS},
        }
        atomic_write_json(out / "stats.json", stats)
        return stats
    from aiayn.data.sources import prepare_source

    return prepare_source(d, out)


def bpe(cfg: DictConfig) -> dict[str, Any]:
    """Train the joint subword model on the training text and encode every split to data/bpe/."""
    from aiayn.data.binary import encode_split
    from aiayn.data.tokenizer import Tokenizer, train_tokenizer

    d, raw, out = cfg.data, Path(cfg.paths.raw), Path(cfg.paths.bpe)
    for split in SPLITS:
        for side in ("src", "tgt"):
            if not (raw / f"{split}.{side}").exists():
                raise FileNotFoundError(f"{raw / f'{split}.{side}'} is missing: run the fetch stage first")
    if out.exists():
        shutil.rmtree(out)  # a stage output: rebuilt whole, never mixed with an older tokenizer's files
    out.mkdir(parents=True)
    model = train_tokenizer(
        [raw / "train.src", raw / "train.tgt"], out / "spm", vocab_size=d.vocab_size, model_type=d.model_type,
        sample_size=d.bpe_sample, character_coverage=d.character_coverage, seed=d.seed,
    )
    tokenizer = Tokenizer(model)
    stats: dict[str, Any] = {"vocab_size": tokenizer.vocab_size, "model_type": d.model_type, "splits": {}}
    for split in SPLITS:
        stats["splits"][split] = encode_split(tokenizer, raw / f"{split}.src", raw / f"{split}.tgt", out / split)
        log.info("encoded %s: %s", split, stats["splits"][split])
    atomic_write_json(out / "stats.json", stats)
    return stats
