"""`aiayn-export RUN_DIR OUT --to hf|ct2`: a finished run's averaged weights, exported atomically."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from aiayn import export
from aiayn.export.card import find_evaluation
from aiayn.export.ct2 import export_ct2
from aiayn.export.hf import export_hf
from aiayn.export.targets import TARGETS, check_exportable, require
from aiayn.run import folders


def export_run(
    run_dir: Path,
    out: Path,
    target: str,
    *,
    average: int | None = None,
    bpe_dir: Path | None = None,
    quantization: str | None = None,
    force: bool = False,
) -> float:
    """Export the finished run in `run_dir` (aiayn.inference.trained.open_run: its averaged weights and tokenizer) to
    `out` as `target` ("hf" or "ct2"); returns the export's probe gap. `out` must not exist unless `force`, which
    replaces it; nothing is written to `out` unless the export checked out."""
    require(target)
    if target != "ct2" and quantization:
        raise ValueError("--quantization is for --to ct2 (a MarianMTModel folder is written in float32)")
    out = Path(out)
    if out.exists() and not force and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists; give another folder, or --force to replace it")
    from aiayn.inference.trained import finished_run, open_run, tokenizer_dir

    check_exportable(finished_run(run_dir).model, target)
    opened = open_run(run_dir, average=average, bpe_dir=bpe_dir)
    model = opened.model.cpu().float().eval()
    spm_model = tokenizer_dir(Path(run_dir), opened.cfg, bpe_dir) / folders.TOKENIZER
    evaluation_path = find_evaluation(opened.cfg)
    card: dict[str, Any] = dict(
        run=str(run_dir),
        row=str(opened.cfg.row.name),
        seed=opened.cfg.seed,
        variant=dict(opened.cfg.variant),
        checkpoints=[p.name for p in opened.checkpoints],
        evaluation=json.loads(evaluation_path.read_text(encoding="utf-8")) if evaluation_path else None,
        evaluation_path=str(evaluation_path) if evaluation_path else None,
        src_lang=opened.cfg.data.src_lang,
        tgt_lang=opened.cfg.data.tgt_lang,
        decode=dataclasses.asdict(opened.cfg.decode),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.export-"))
    try:
        written = staging / "model"
        if target == "hf":
            gap = export_hf(
                model,
                spm_model,
                written,
                beam_size=int(opened.cfg.decode.beam_size),
                length_penalty=float(opened.cfg.decode.length_penalty),
                **card,
            )
        else:
            gap = export_ct2(model, spm_model, written, quantization=quantization, **card)
        _share(written)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        written.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return gap


def _share(folder: Path) -> None:
    """Files and folders under `folder` readable as the umask allows (some writers leave a file 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiayn-export", description=(export.__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder, such as runs/base/seed1")
    parser.add_argument("out", type=Path, help="the folder to write (must not exist, unless --force)")
    parser.add_argument("--to", required=True, choices=sorted(TARGETS), help="hf: MarianMTModel; ct2: CTranslate2")
    parser.add_argument("--average", type=int, help="average the last K checkpoints (default: the row's average_last)")
    parser.add_argument("--bpe", type=Path, help="the bpe folder holding the run's spm.model (default: paths.bpe)")
    parser.add_argument("--quantization", help="--to ct2 only: CTranslate2's weight type, e.g. int8 (default: float32)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    if args.average is not None and args.average < 1:
        parser.error("--average: give a number of 1 or more")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s", stream=sys.stderr)
    try:
        gap = export_run(
            args.run_dir,
            args.out,
            args.to,
            average=args.average,
            bpe_dir=args.bpe,
            quantization=args.quantization,
            force=args.force,
        )
    except (FileNotFoundError, FileExistsError, ValueError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    what = "log-probability" if args.to == "ct2" else "relative logit"
    print(f"{args.out}: exported ({what} gap to ours on the probe batch {gap:.2g}, float32)")
    return 0
