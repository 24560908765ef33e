"""The fetch stage: the raw parallel corpus (synthetic, a local folder, Multi30k or WMT14), cleaned, with its stats."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from aiayn.config.schema import DATA_SOURCES, Config
from aiayn.io import atomic_write_json
from aiayn.run import folders


def fetch(cfg: Config) -> dict[str, Any]:
    """Write data/raw/{train,valid,test}.{src,tgt} and stats.json for `cfg.data.name`."""
    d, out = cfg.data, Path(cfg.paths.raw)
    out.mkdir(parents=True, exist_ok=True)
    if d.name == "synthetic":
        from aiayn.data.synthetic import write_corpus

        written = write_corpus(
            out,
            {"train": d.train_size, "valid": d.valid_size, "test": d.test_size},
            seed=d.seed,
            lexicon_scale=d.lexicon_scale,
            max_words=d.max_words,
        )
        stats = {
            "source": "synthetic",
            "seed": d.seed,
            "lexicon_scale": d.lexicon_scale,
            "max_words": d.max_words,
            "src_lang": d.src_lang,
            "tgt_lang": d.tgt_lang,
            "valid_set": f"synthetic valid (seed {d.seed})",
            "test_set": f"synthetic test (seed {d.seed})",
        }
        stats.update(
            {
                split: {
                    "read": w["pairs"],
                    "kept": w["pairs"],
                    "src_words": w["src_words"],
                    "tgt_words": w["tgt_words"],
                }
                for split, w in written.items()
            }
        )
        atomic_write_json(out / folders.DATA_STATS, stats)
        return stats
    from aiayn.data.clean import CleanOptions
    from aiayn.data.sources.local import prepare_local
    from aiayn.data.sources.multi30k import prepare_multi30k
    from aiayn.data.sources.wmt14 import prepare_wmt14

    # the data library's own option types, so that it is used without this config too
    clean = CleanOptions(**dataclasses.asdict(d.clean))
    if d.name == "local":
        assert d.path is not None, "data=local's data.path is mandatory (???): prepare refuses it missing"
        return prepare_local(
            Path(d.path),
            out,
            d.src_lang,
            d.tgt_lang,
            train_prefix=d.train_prefix,
            valid_prefix=d.valid_prefix,
            test_prefix=d.test_prefix,
            clean=clean,
            max_train_pairs=d.max_train_pairs,
            holdout_size=d.holdout_size,
            holdout_seed=d.seed,
        )
    if d.name == "multi30k" or d.name.startswith("wmt14_"):
        from aiayn.data.download import RetryPolicy

        policy = RetryPolicy(**dataclasses.asdict(d.download))
        cache, most = Path(d.cache_dir).expanduser(), d.max_train_pairs
        if d.name == "multi30k":
            return prepare_multi30k(
                out, cache, d.mirror, clean, most, src_lang=d.src_lang, tgt_lang=d.tgt_lang, policy=policy, form=d.form
            )
        return prepare_wmt14(
            d.name, out, cache, d.mirror, clean, most, src_lang=d.src_lang, tgt_lang=d.tgt_lang, policy=policy
        )
    raise ValueError(f"data.name={d.name!r} is not one of {', '.join(DATA_SOURCES)}")
