"""Table 2's rows as the ensemble of their seeds: the test set decoded by every seed's Table 2 weights together
(the mean of each seed's last `row.average_last` checkpoints; log-probabilities averaged at every step of one beam
search, aiayn.decode.step.EnsembleStepper), scored as one system. The paper could not have this line: its seeds
were not trained. Written to evals/{row}/[{variant}/]ensemble/ (eval.json, hyps.test.txt) by the evaluate stage
after the seeds' own evaluations (dvc.yaml), read by the aggregate stage's Table 2.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

from aiayn.checkpoint.averaging import select_last
from aiayn.config.schema import Config
from aiayn.eval.scoring import score_translations
from aiayn.inference.trained import decode_device, decode_precision, load_weights, run_tokenizer
from aiayn.io import atomic_write_json, atomic_write_text
from aiayn.run import floatpath, folders, kept, tracking
from aiayn.run.folders import RunSpec
from aiayn.stages.evaluate import decode_split, protocol

log = logging.getLogger(__name__)


def ensemble(cfg: Config, seeds: list[int]) -> dict[str, Any] | None:
    """Decode and score the test set with the ensemble of `seeds` of cfg's row (and variant); None, writing
    nothing, for a row outside Table 2 or fewer than two seeds."""
    if "table2" not in cfg.row.tables or len(seeds) < 2:
        log.info("%s: no seed ensemble (%s)", cfg.row.name, "not in Table 2" if len(seeds) >= 2 else "one seed")
        return None
    tracking.refuse_secrets(cfg)
    spec = RunSpec.of(cfg)
    specs = [dataclasses.replace(spec, seed=seed) for seed in seeds]
    # A kept seed (aiayn.run.kept) has no checkpoints here: an ensemble of the others would not be the seeds'
    without = [s.seed for s in specs if not s.checkpoints.is_dir() and kept.kept_run(_with_seed(cfg, s.seed))]
    if without:
        log.info("%s: no seed ensemble (seeds %s are kept without checkpoints)", cfg.row.name, without)
        return None
    float_path = floatpath.pin_stage(cfg.trainer, decode_precision(cfg))
    device = decode_device(cfg)
    paths = [select_last(s.checkpoints, protocol(cfg, "test")) for s in specs]
    tokenizers = [run_tokenizer(Path(cfg.paths.bpe), p[-1]) for p in paths]  # each seed checked against it
    models = [load_weights(p, device) for p in paths]
    start = time.perf_counter()
    hyps, refs, _, _, limited = decode_split(cfg, models, tokenizers[0], "test", device)
    scores = score_translations(
        hyps,
        refs,
        tgt_lang=cfg.data.tgt_lang,
        bootstrap=cfg.decode.bootstrap,
        seed=seeds[0],
        tokenized=cfg.data.form == "lc.norm.tok",
    )
    out = spec.ensemble_dir
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / folders.hyps_file("test"), "".join(h + "\n" for h in hyps))
    result: dict[str, Any] = {
        "seeds": list(seeds),
        "runs": [str(s.run_dir) for s in specs],
        "beam_size": cfg.decode.beam_size if cfg.decode.strategy == "beam" else 1,
        "length_penalty": cfg.decode.length_penalty,
        "length_norm": cfg.decode.length_norm,
        "precision": decode_precision(cfg),
        "float_path": float_path,
        "test": {
            "checkpoints_averaged": len(paths[0]),
            "checkpoints": [[p.name for p in ps] for ps in paths],
            **scores,
            "sentences_per_s": round(len(refs) / max(time.perf_counter() - start, 1e-9), 3),
            "at_length_limit": sum(limited),
        },
    }
    atomic_write_json(out / folders.EVAL, result)
    log.info("%s: ensemble of seeds %s, test BLEU %.2f", out, seeds, result["test"]["bleu"])
    return result


def _with_seed(cfg: Config, seed: int) -> Config:
    """cfg for another seed of its row (a sealed config's changed copy)."""
    return dataclasses.replace(cfg, seed=seed)
