"""The evaluate stage: average the run's last checkpoints, decode dev and test, score, write eval.json.

Dev (newstest2013 for WMT) gives Table 3's BLEU and PPL; test (newstest2014) gives Table 2's BLEU.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from aiayn import tracking
from aiayn.data.batching import eval_batches
from aiayn.data.tokenizer import Tokenizer
from aiayn.decode import translate
from aiayn.decode.translate import autocast
from aiayn.eval.averaging import average_checkpoints, select_last
from aiayn.eval.bleu import sacre_bleu
from aiayn.eval.evaluate import score_translations
from aiayn.eval.perplexity import dev_perplexity
from aiayn.io import atomic_write_json, atomic_write_text, read_json, read_lines
from aiayn.model import ModelConfig, Transformer
from aiayn.progress import Progress

log = logging.getLogger(__name__)


def load_model(ckpt_dir: Path, average_last: int, device: torch.device) -> tuple[Transformer, list[Path]]:
    """The run's model with the mean weights of its last `average_last` checkpoints (0 or 1: the last one)."""
    if (ckpt_dir / "last.ckpt").exists():
        _open_checkpoint(ckpt_dir / "last.ckpt")  # select_last reads its step: name it if it is unreadable
    paths = select_last(ckpt_dir, average_last)
    hparams = [_open_checkpoint(p) for p in paths][-1]["hyper_parameters"]
    model = Transformer(ModelConfig(**hparams["model"]), hparams["vocab_size"], hparams["pad_id"])
    model.load_state_dict(average_checkpoints(paths))
    return model.to(device).eval(), paths


def _open_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint memory-mapped (weights_only=True); a truncated or corrupt file is an error naming it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:
        raise ValueError(f"{path}: unreadable checkpoint ({type(err).__name__}: {err}); delete it and rerun the "
                         f"train stage to rewrite it") from err


def decode_split(cfg: DictConfig, model, tokenizer, split: str, device
                 ) -> tuple[list[str], list[str], float, list[str]]:
    """Translate `data/raw/{split}.src`; return hypotheses, references, sentences per second and the sources."""
    raw = Path(cfg.paths.raw)
    sources, refs = read_lines(raw / f"{split}.src"), read_lines(raw / f"{split}.tgt")
    start = time.perf_counter()
    hyps = translate(
        model, tokenizer, sources, strategy=cfg.decode.strategy, beam_size=cfg.decode.beam_size,
        alpha=cfg.decode.length_penalty, max_len_b=cfg.decode.max_len_b, batch_tokens=cfg.decode.batch_tokens,
        device=device, compact_every=cfg.decode.compact_every,
        progress=Progress(f"decode {split} ({cfg.decode.strategy})", len(sources), "sentences"),
    )
    return hyps, refs, len(sources) / max(time.perf_counter() - start, 1e-9), sources


def evaluate(cfg: DictConfig) -> dict[str, Any]:
    """Score run `runs/{row}/seed{seed}` into `evals/{row}/seed{seed}/`: eval.json and hyps.valid.txt, plus
    hyps.test.txt and the test scores for a row in Table 2 (`table2` in `row.tables`)."""
    tracking.refuse_secrets(cfg)
    run_dir, eval_dir, bpe_dir = Path(cfg.paths.run_dir), Path(cfg.paths.eval_dir), Path(cfg.paths.bpe)
    eval_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if cfg.trainer.accelerator == "gpu" and torch.cuda.is_available() else "cpu")
    model, paths = load_model(run_dir / "checkpoints", cfg.row.average_last, device)
    tokenizer = Tokenizer(bpe_dir / "spm.model")
    wandb_run = tracking.start_run(cfg, job_type="eval")
    tracking.use_inputs(wandb_run, [tracking.checkpoint_artifact(cfg)])
    try:
        result: dict[str, Any] = {"variant": OmegaConf.to_container(cfg.variant), "run": str(run_dir),
                                  "checkpoints_averaged": len(paths), "checkpoints": [p.name for p in paths],
                                  "beam_size": cfg.decode.beam_size if cfg.decode.strategy == "beam" else 1,
                                  "length_penalty": cfg.decode.length_penalty, "strategy": cfg.decode.strategy,
                                  "precision": decode_precision(cfg)}
        lines = {}
        splits = (("valid", "dev_"), ("test", "")) if "table2" in cfg.row.tables else (("valid", "dev_"),)
        for split, prefix in splits:
            with autocast(result["precision"], device):
                hyps, refs, speed, sources = decode_split(cfg, model, tokenizer, split, device)
            lines[split] = len(refs)
            atomic_write_text(eval_dir / f"hyps.{split}.txt", "".join(h + "\n" for h in hyps))
            scores = score_translations(hyps, refs, tgt_lang=cfg.data.tgt_lang,
                                        bootstrap=cfg.decode.bootstrap if split == "test" else 0, seed=cfg.seed)
            result.update({prefix + k: v for k, v in scores.items()})
            result[f"{prefix}sentences_per_s"] = round(speed, 3)
            # The trivial baseline: the source sentence copied unchanged, scored the same way.
            result[f"{prefix}copy_baseline_bleu"] = sacre_bleu(sources, refs)[0]
        _log_samples(wandb_run, sources, refs, hyps, cfg.decode.samples)  # of the last set decoded
        result.update(_set_names(cfg, lines))
        batches = eval_batches(bpe_dir, "valid", tokenizer, cfg.train.max_tokens)
        with autocast(result["precision"], device):
            result["dev_ppl"] = dev_perplexity(model, _to(batches, device), tokenizer.pad_id)
        atomic_write_json(eval_dir / "eval.json", result)
        tracking.safe_log(wandb_run, {metric_key(k): v for k, v in result.items() if isinstance(v, (int, float))})
        tracking.log_output(wandb_run, tracking.eval_artifact(cfg))
    finally:
        tracking.finish(wandb_run)
    return result


def decode_precision(cfg: DictConfig) -> str:
    """decode.precision, or the precision the run trained in (trainer.precision) when it is null."""
    return str(cfg.decode.precision or cfg.trainer.precision)


def metric_key(key: str) -> str:
    """wandb's name of an eval.json number: dev-set scores under dev/ (dev_bleu -> dev/bleu), the rest under
    test/ (bleu -> test/bleu)."""
    return f"dev/{key[4:]}" if key.startswith("dev_") else f"test/{key}"


def _to(loader, device):
    for batch in loader:
        yield {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _set_names(cfg: DictConfig, lines: dict[str, int]) -> dict[str, Any]:
    """Which sets were scored, from the fetch stage's stats.json (e.g. newstest2014-full, 3003 lines)."""
    stats_path = Path(cfg.paths.raw) / "stats.json"
    stats = read_json(stats_path) if stats_path.exists() else {}
    names = {"test": stats.get("test_set", f"{cfg.data.name}/test"),
             "valid": stats.get("valid_set", f"{cfg.data.name}/valid")}
    return {("dev_set" if split == "valid" else "test_set"): {"name": names[split], "lines": n}
            for split, n in lines.items()}


def _log_samples(run, sources: list[str], refs: list[str], hyps: list[str], n: int) -> None:
    if run is None or n <= 0:
        return
    try:
        import wandb

        table = wandb.Table(columns=["source", "reference", "hypothesis"],
                            data=[[s, r, h] for s, r, h in list(zip(sources, refs, hyps))[:n]])
        run.log({"test/samples": table})
    except Exception as err:  # browsing aid only
        log.warning("could not log sample translations to wandb: %s", err)
