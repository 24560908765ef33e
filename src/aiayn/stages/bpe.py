"""The bpe stage: a joint subword model trained on the training text, and every split encoded for the loader."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from aiayn.config.schema import Config
from aiayn.io import atomic_write_json
from aiayn.run import folders

log = logging.getLogger(__name__)


def bpe(cfg: Config) -> dict[str, Any]:
    """Train the joint subword model on the training text and encode every split to data/bpe/."""
    from aiayn.data.binary import encode_split
    from aiayn.data.tokenizer import Tokenizer, train_tokenizer

    d, raw, out = cfg.data, Path(cfg.paths.raw), Path(cfg.paths.bpe)
    for split in folders.SPLITS:
        for side in ("src", "tgt"):
            if not (raw / folders.raw_file(split, side)).exists():
                raise FileNotFoundError(f"{raw / f'{split}.{side}'} is missing: run the fetch stage first")
    if out.exists():
        shutil.rmtree(out)  # a stage output: rebuilt whole, never mixed with an older tokenizer's files
    out.mkdir(parents=True)
    model = train_tokenizer(
        [raw / folders.raw_file("train", "src"), raw / folders.raw_file("train", "tgt")],
        out / folders.TOKENIZER_PREFIX,
        vocab_size=d.vocab_size,
        model_type=d.model_type,
        sample_size=d.bpe_sample,
        character_coverage=d.character_coverage,
        seed=d.seed,
    )
    tokenizer = Tokenizer(model)
    stats: dict[str, Any] = {"vocab_size": tokenizer.vocab_size, "model_type": d.model_type, "splits": {}}
    for split in folders.SPLITS:
        stats["splits"][split] = encode_split(
            tokenizer, raw / folders.raw_file(split, "src"), raw / folders.raw_file(split, "tgt"), out / split
        )
        log.info("encoded %s: %s", split, stats["splits"][split])
    atomic_write_json(out / folders.DATA_STATS, stats)
    return stats
