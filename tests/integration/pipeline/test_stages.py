"""Each pipeline stage's run() on the smoke scale in a temporary folder, in DAG order, as DVC would call them
(the `workspace` fixture, tests/integration/pipeline/conftest.py)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from tests.integration.pipeline.smoke import REPO, overrides, stage

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.eval.runaways import repeats


def test_fetch_writes_the_six_files_and_stats(workspace: Path) -> None:
    raw = workspace / "data" / "raw"
    for split, n in (("train", 600), ("valid", 40), ("test", 40)):
        for side in ("src", "tgt"):
            assert len((raw / f"{split}.{side}").read_text(encoding="utf-8").splitlines()) == n
    stats = json.loads((raw / "stats.json").read_text())
    assert stats["source"] == "synthetic" and stats["test"]["kept"] == 40


def test_bpe_writes_tokenizer_and_encoded_splits(workspace: Path) -> None:
    bpe = workspace / "data" / "bpe"
    assert (bpe / "spm.model").exists()
    for split in ("train", "valid", "test"):
        assert (bpe / f"{split}.src.bin").stat().st_size > 0 and (bpe / f"{split}.json").exists()


def test_train_writes_the_run_folder(workspace: Path) -> None:
    run = workspace / "runs" / "base" / "seed1"
    summary = json.loads((run / "train.json").read_text())
    assert summary["steps"] == 12 and summary["tokens_seen"]["tgt"] > 0 and summary["val_ppl"] > 1
    config = OmegaConf.load(run / "config.yaml")
    assert config.seed == 1 and config.row.name == "base" and config.model.d_model == 32
    # base averages its last 5: weights-only snapshots at the checkpoint cadence (every 2 steps at smoke scale)
    ckpts = sorted(p.name for p in (run / "checkpoints").glob("step-*.ckpt"))
    assert ckpts == [f"step-{step:08d}.ckpt" for step in (4, 6, 8, 10, 12)], ckpts
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)  # plain values only
    assert state["hyper_parameters"]["model"]["d_model"] == 32 and state["optimizer_states"]  # resumable
    snapshot = torch.load(run / "checkpoints" / ckpts[-1], weights_only=True)
    assert "optimizer_states" not in snapshot and snapshot["state_dict"].keys() == state["state_dict"].keys()
    with open(run / "curve.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows if r["val_ppl"]] == [6, 12]


def test_same_seed_same_metrics_different_seed_different(workspace: Path, tmp_path: Path) -> None:
    first = json.loads((workspace / "runs" / "base" / "seed1" / "train.json").read_text())
    other = json.loads((workspace / "runs" / "base" / "seed2" / "train.json").read_text())
    again = stage("train").run(prepare(compose(overrides(workspace, "seed=1", f"paths.runs={tmp_path}/runs"))))
    assert again["val_loss"] == first["val_loss"] and again["train_loss"] == first["train_loss"]
    assert other["val_loss"] != first["val_loss"]


def test_a_finished_seed_is_skipped_not_retrained(workspace: Path) -> None:
    run = workspace / "runs" / "base" / "seed1"
    last = run / "checkpoints" / "last.ckpt"
    stamp = last.stat().st_mtime_ns
    again = stage("train").run(prepare(compose(overrides(workspace, "seed=1"))))
    assert again == json.loads((run / "train.json").read_text()) and last.stat().st_mtime_ns == stamp


def test_a_table3_row_is_scored_on_the_dev_set_only(workspace: Path) -> None:
    stage("train").run(prepare(compose(overrides(workspace, "row=C1"))))
    scores = stage("evaluate").run(prepare(compose(overrides(workspace, "row=C1"))))
    out = workspace / "evals" / "C1" / "seed1"
    assert json.loads((out / "eval.json").read_text()) == scores
    assert scores["dev"]["bleu"] >= 0 and scores["dev"]["ppl"] > 1 and scores["dev"]["checkpoints_averaged"] == 1
    assert "test" not in scores and not (out / "hyps.test.txt").exists()
    assert not list((workspace / "runs" / "C1" / "seed1" / "checkpoints").glob("step-*"))  # averages nothing
    assert scores["precision"] == "32-true"  # trainer=cpu's


def test_decode_precision_decodes_and_scores_in_that_arithmetic(workspace: Path) -> None:
    stage("train").run(prepare(compose(overrides(workspace, "row=C1"))))  # a no-op when the test above trained it
    fp32 = stage("evaluate").run(prepare(compose(overrides(workspace, "row=C1"))))
    bf16 = stage("evaluate").run(prepare(compose(overrides(workspace, "row=C1", "decode.precision=bf16-mixed"))))
    assert (workspace / "evals" / "C1" / "precision=bf16-mixed" / "seed1" / "eval.json").exists()  # a variant
    assert bf16["precision"] == "bf16-mixed" and bf16["dev"]["bleu"] >= 0
    # bf16 matmuls move the perplexity a little (so autocast was on), and only a little
    assert bf16["dev"]["ppl"] != fp32["dev"]["ppl"] and abs(bf16["dev"]["ppl"] / fp32["dev"]["ppl"] - 1) < 0.05


def test_evaluate_scores_table3_on_the_last_checkpoint_and_table2_on_the_average(workspace: Path) -> None:
    """base (Tables 2 and 3): dev from the last checkpoint alone, as every Table 3 row; test from the average of
    the last 5 snapshots; each section names its own checkpoints."""
    run = workspace / "evals" / "base" / "seed1"
    scores = json.loads((run / "eval.json").read_text())
    assert scores["beam_size"] == 4 and scores["length_penalty"] == 0.6 and scores["length_norm"] == "gnmt"
    for key in (
        "bleu",
        "sacrebleu_signature",
        "bleu_paper",
        "bleu_lc_tok",
        "bleu_lc_tok_signature",
        "chrf",
        "set",
        "checkpoints_averaged",
        "checkpoints",
        "sentences_per_s",
        "copy_baseline_bleu",
        "runaways",
    ):
        assert key in scores["dev"] and key in scores["test"], key
    # The runaways are what the hypotheses file shows: a repeating line is counted, and named, by its number.
    hyps = (run / "hyps.valid.txt").read_text(encoding="utf-8").splitlines()
    runaways = scores["dev"]["runaways"]
    assert runaways["repeating"] == sum(map(repeats, hyps))
    repeating, named = [n for n, line in enumerate(hyps, 1) if repeats(line)], runaways["lines"]
    assert all(n in named for n in repeating if runaways["count"] <= 20 or n <= named[-1])  # the first 20 named
    assert runaways["count"] == len(runaways["lines"]) or len(runaways["lines"]) == 20
    assert scores["float_path"].endswith(", 1 thread")  # the cpu trainer's one thread
    assert scores["dev"]["ppl"] > 1 and "ppl" not in scores["test"]
    assert scores["test"]["checkpoints_averaged"] == 5
    assert scores["test"]["checkpoints"] == [f"step-{s:08d}.ckpt" for s in (4, 6, 8, 10, 12)]
    assert scores["dev"]["checkpoints_averaged"] == 1 and scores["dev"]["checkpoints"] == ["step-00000012.ckpt"]
    assert scores["test"]["bleu_ci95"] is not None and scores["dev"]["bleu_ci95"] is None  # Table 2's interval
    assert scores["test"]["set"]["lines"] == 40 and "nrefs:1" in scores["test"]["sacrebleu_signature"]
    assert len((run / "hyps.test.txt").read_text(encoding="utf-8").splitlines()) == 40


def test_dev_averaging_decodes_the_average_of_the_runs_last_snapshots(workspace: Path) -> None:
    """row.dev_average_last (the tiny scale's 5; docs/departures.md#dev-averaging): the dev section decodes and
    scores the average of the run's last snapshots, as the test section does, in its own evaluation folder."""
    averaged = stage("evaluate").run(prepare(compose(overrides(workspace, "row.dev_average_last=3"))))
    assert averaged["dev"]["checkpoints"] == [f"step-{s:08d}.ckpt" for s in (8, 10, 12)]
    assert averaged["dev"]["checkpoints_averaged"] == 3
    last = json.loads((workspace / "evals" / "base" / "seed1" / "eval.json").read_text())
    assert averaged["dev"]["ppl"] != last["dev"]["ppl"]  # other weights
    assert (workspace / "evals" / "base" / "dev_average_last=3" / "seed1" / "eval.json").exists()


def test_evaluation_of_the_last_checkpoint_is_that_checkpoints_model(workspace: Path) -> None:
    """The dev section's hypotheses are what the last checkpoint's own weights decode, not the average's: a
    second evaluation of base with averaging off (row.average_last=0, its own folder) decodes dev identically."""
    once = json.loads((workspace / "evals" / "base" / "seed1" / "eval.json").read_text())
    plain = stage("evaluate").run(prepare(compose(overrides(workspace, "row.average_last=0"))))
    assert plain["dev"]["bleu"] == once["dev"]["bleu"] and plain["dev"]["ppl"] == once["dev"]["ppl"]
    assert plain["test"]["checkpoints"] == plain["dev"]["checkpoints"] == ["step-00000012.ckpt"]
    assert (workspace / "evals" / "base" / "average_last=0" / "seed1" / "hyps.valid.txt").read_text() == (
        workspace / "evals" / "base" / "seed1" / "hyps.valid.txt"
    ).read_text()


def test_aggregate_writes_table3_with_seed_counts(workspace: Path) -> None:
    with open(workspace / "results" / "table3.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["row"] for r in rows] == ["base"] and rows[0]["n_seeds"] == "2"
    for col in ("bleu_mean", "bleu_ci95_low", "bleu_ci95_high", "ppl_gmean", "ppl_ci95_low", "ppl_ci95_high"):
        assert col in rows[0]
    assert float(rows[0]["ppl_ci95_low"]) <= float(rows[0]["ppl_gmean"]) <= float(rows[0]["ppl_ci95_high"])
    assert rows[0]["checkpoints_averaged"] == "1"  # Table 3: base from its last checkpoint, as every row
    with open(workspace / "results" / "table2.csv", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["checkpoints_averaged"] == "5"  # Table 2: base averaged
    assert (workspace / "results" / "table3.md").exists() and (workspace / "results" / "table2.md").exists()
    with open(workspace / "results" / "curves.csv", encoding="utf-8") as f:  # for `dvc plots show`
        points = [(r["run"], int(r["step"])) for r in csv.DictReader(f)]
    assert points == [("base-s1", 6), ("base-s1", 12), ("base-s2", 6), ("base-s2", 12)]
    rows_json = json.loads((workspace / "results" / "rows.json").read_text())  # each row's headline numbers
    assert set(rows_json["table3"]["base"]) == {"dev_bleu", "dev_bleu_ci95", "dev_runaways"}  # base has no verdict
    assert rows_json["table3"]["base"]["dev_bleu"] == pytest.approx(float(rows[0]["bleu_mean"]))
    assert set(rows_json["table2"]["base"]) == {"test_bleu", "test_bleu_tok", "test_bleu_lc_tok"}
    metrics = json.loads((workspace / "results" / "metrics.json").read_text())  # for `dvc exp show`: a few columns
    assert metrics == {  # base alone: no claims to count
        "dev_bleu": pytest.approx(float(rows[0]["bleu_mean"])),
        "dev_ppl": pytest.approx(float(rows[0]["ppl_gmean"])),
        "base_test_bleu": pytest.approx(rows_json["table2"]["base"]["test_bleu"]),
    }


def test_multi30k_from_a_local_folder_end_to_end(shared_dir: Path, tmp_path: Path) -> None:
    """data=local on a folder of Multi30k's plain files: the real corpus through every per-run stage (smoke-sized
    model), its test set held out of train."""
    extra = ("data=local", f"data.path={shared_dir / 'data' / 'multi30k'}", "data.max_train_pairs=3000")
    stats = stage("fetch").run(prepare(compose(overrides(tmp_path, *extra))))
    assert stats["valid"]["kept"] == 1014 and stats["test"]["kept"] == 1000
    stage("bpe").run(prepare(compose(overrides(tmp_path, *extra))))
    stage("train").run(prepare(compose(overrides(tmp_path, *extra))))
    scores = stage("evaluate").run(prepare(compose(overrides(tmp_path, *extra))))
    assert scores["dev"]["set"]["lines"] == 1014 and scores["test"]["set"]["lines"] == 1000
    assert "held out" in scores["test"]["set"]["name"]


def test_the_evaluate_stage_starts_without_lightning() -> None:
    """DVC starts evaluate once per row: importing Lightning would add about 5 s to each of those processes."""
    import subprocess
    import sys

    code = (
        "import sys, importlib.util as u; s = u.spec_from_file_location('e', 'pipeline/evaluate.py'); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); import aiayn.stages.evaluate; "
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('lightning', 'pytorch_lightning')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_run_whose_output_goes_to_a_file_logs_plain_progress_lines(workspace: Path, tmp_path: Path) -> None:
    """As under dvc repro or SLURM: no progress bar, no banner of Lightning's; with train.progress_every_s=0 a line
    every log_every_steps (the run, step / max, loss, lr, tokens/s, elapsed, ETA) and a summary line at the end; the
    evaluate stage's one line a run, its scores and sentences."""
    import os
    import subprocess
    import sys

    args = [a for a in overrides(workspace) if not a.startswith(("paths.runs", "paths.evals", "trainer.enable"))]
    args += [f"paths.runs={tmp_path}/runs", f"paths.evals={tmp_path}/evals", f"hydra.run.dir={tmp_path}/out"]
    env = dict(os.environ, WANDB_MODE="offline")
    with open(tmp_path / "train.log", "w") as log:
        args_train = [*args, "train.progress_every_s=0"]  # a file, not a terminal
        subprocess.run(
            [sys.executable, str(REPO / "pipeline" / "train.py"), *args_train],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=True,
            timeout=300,
        )
    text = (tmp_path / "train.log").read_text()
    lines = [line for line in text.splitlines() if ": step " in line]
    assert [line.split(": step ")[1].split()[0] for line in lines] == [f"{s}/12" for s in range(2, 13, 2)]
    assert all(k in lines[-1] for k in ("loss", "lr", "tokens/s", "elapsed", "ETA")) and "Epoch 0" not in text
    assert all(line.split(" - ")[1].startswith(f"{tmp_path}/runs/base/") for line in lines)  # which run
    assert ": trained 12 steps, dev PPL" in text
    for banner in ("GPU available", "TPU available", "Tip:", "Seed set to", "LeafSpec", "`Trainer.fit` stopped"):
        assert banner not in text, banner
    out = subprocess.run(
        [sys.executable, str(REPO / "pipeline" / "evaluate.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    logged = out.stdout + out.stderr
    assert "/evals/base/seed1: dev BLEU " in logged and "(40 sentences, " in logged and "test BLEU " in logged
    assert "decode valid" not in logged  # a decode of seconds is summed up in the run's line, not reported apart


def test_a_snapshot_cadence_change_is_another_run_of_a_row_that_averages(workspace: Path) -> None:
    """train.snapshot_every_steps decides which weights base averages for Table 2: with another cadence base is
    another run, trained in its own folder and averaged from its own snapshots. The folder's name follows from the
    variant alone, so C1, which averages nothing, gets a folder of that name too, beside its own."""
    from aiayn.run.folders import RunSpec

    cadence = "train.snapshot_every_steps=3"
    cfg = compose(overrides(workspace, cadence))
    spec = RunSpec.of(cfg)
    assert spec.run_dir == workspace / "runs" / "base" / "snapshot_every_steps=3" / "seed1"
    stage("train").run(prepare(cfg))
    assert sorted(p.name for p in spec.checkpoints.glob("step-*")) == [f"step-{s:08d}.ckpt" for s in (3, 6, 9, 12)]
    scores = stage("evaluate").run(prepare(compose(overrides(workspace, cadence))))
    assert scores["test"]["checkpoints"] == [f"step-{s:08d}.ckpt" for s in (3, 6, 9, 12)]
    c1 = RunSpec.of(compose(overrides(workspace, "row=C1", cadence)))
    assert c1.run_dir == workspace / "runs" / "C1" / "snapshot_every_steps=3" / "seed1"


def test_a_change_of_the_code_a_run_executes_retrains_it(workspace: Path, tmp_path: Path, monkeypatch, caplog) -> None:
    """An edit of the training code (any module the train stage imports: the encoded-data reader, the tokenizer,
    ...) moves the old checkpoints aside and trains again; the code digest is the stand-in for the edit here
    (tests/run/test_folders.py shows an edit changes it)."""
    import logging
    import shutil

    import aiayn.train.fingerprint

    shutil.copytree(workspace / "data", tmp_path / "data")
    shutil.copytree(workspace / "runs" / "base" / "seed1", tmp_path / "runs" / "base" / "seed1")
    monkeypatch.setattr(aiayn.train.fingerprint, "code_digest", lambda entry, root=None: "an edited binary.py")
    with caplog.at_level(logging.WARNING, logger="aiayn.train.checkpointing"):
        summary = stage("train").run(prepare(compose(overrides(tmp_path))))
    assert "code_sha256: checkpoint" in caplog.text and "!= now 'an edited binary.py'" in caplog.text
    assert len(list((tmp_path / "runs" / "base" / "seed1").glob("stale-checkpoints-*"))) == 1
    assert summary["steps"] == 12


def test_a_file_name_changed_in_runspec_moves_every_writer_and_reader(
    workspace: Path, tmp_path: Path, monkeypatch
) -> None:
    """The run files are named in one place: renamed there, train, evaluate and aggregate still find each
    other's files, under the new names only."""
    import shutil

    import aiayn.run.folders

    for name, value in (
        ("TRAIN_SUMMARY", "summary.json"),
        ("EVAL", "scores.json"),
        ("CURVE", "learning.csv"),
        ("CONFIG", "resolved.yaml"),
    ):
        monkeypatch.setattr(aiayn.run.folders, name, value)
    shutil.copytree(workspace / "data", tmp_path / "data")
    (tmp_path / "params.yaml").write_text("rows: [base]\nseeds: [1]\n")
    stage("train").run(prepare(compose(overrides(tmp_path))))
    stage("evaluate").run(prepare(compose(overrides(tmp_path))))
    stage("aggregate").run(prepare(compose(overrides(tmp_path, f"tables.params_file={tmp_path}/params.yaml"))))
    run, evaluation = tmp_path / "runs" / "base" / "seed1", tmp_path / "evals" / "base" / "seed1"
    assert {"summary.json", "learning.csv", "resolved.yaml"} <= {p.name for p in run.iterdir()}
    assert (evaluation / "scores.json").is_file() and not (evaluation / "eval.json").exists()
    assert not {"train.json", "curve.csv", "config.yaml"} & {p.name for p in run.iterdir()}
    with open(tmp_path / "results" / "table3.csv", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["n_seeds"] == "1"  # the aggregate found the run and its evaluation
    with open(tmp_path / "results" / "curves.csv", encoding="utf-8") as f:
        assert [r["run"] for r in csv.DictReader(f)] == ["base-s1", "base-s1"]


def test_patience_stops_a_run_where_the_dev_loss_stopped_falling(workspace: Path, tmp_path: Path) -> None:
    """train.patience (fairseq's --patience): the run stops at the first validation that ends `patience` in a row
    without a lower dev loss, read back here from its own curve; the stop's weights are saved (last.ckpt and a
    snapshot), the evaluation averages the last snapshots before it, and a rerun finds the run finished."""
    from aiayn.run.folders import RunSpec

    # A learning rate far too high for the smoke model: the dev loss rises within a few validations.
    extra = ("train.patience=2", "train.val_every_steps=2", "train.lr_factor=30", "train.grad_clip=1")
    extra += ("train.max_steps=40",)
    cfg = compose(overrides(tmp_path, *extra, data=workspace / "data"))
    spec = RunSpec.of(cfg)
    summary = stage("train").run(prepare(cfg))
    with open(spec.run_dir / "curve.csv", encoding="utf-8") as f:
        validations = [(int(r["step"]), float(r["val_loss"])) for r in csv.DictReader(f) if r["val_loss"]]
    best = min(range(len(validations)), key=lambda i: validations[i][1])
    assert summary["stopped"] == "patience" and summary["steps"] < 40
    assert validations[-1][0] == summary["steps"] and len(validations) - 1 - best == 2  # two without a new best
    assert all(loss >= validations[best][1] for _, loss in validations[best + 1 :])
    assert summary["best_val_loss"] == pytest.approx(validations[best][1], rel=1e-6)
    last = torch.load(spec.checkpoints / "last.ckpt", weights_only=True)
    assert last["global_step"] == summary["steps"]
    snapshots = sorted(p.name for p in spec.checkpoints.glob("step-*.ckpt"))
    # every step a snapshot is due (an early stop cannot be foreseen), the last 5 kept (base averages 5)
    assert snapshots == [f"step-{s:08d}.ckpt" for s in range(2, summary["steps"] + 1, 2)][-5:]
    stamp = (spec.checkpoints / "last.ckpt").stat().st_mtime_ns
    assert stage("train").run(prepare(compose(overrides(tmp_path, *extra, data=workspace / "data")))) == summary
    assert (spec.checkpoints / "last.ckpt").stat().st_mtime_ns == stamp  # finished: not resumed for another step


def test_table2s_rows_get_the_ensemble_of_their_seeds(workspace: Path, tmp_path: Path) -> None:
    """evaluate@{row}'s second command: base's seeds decode the test set together (each with its Table 2 weights),
    as aiayn.inference's ensemble of the same runs does; Table 2 prints the line beside the seeds' mean, and a row
    outside Table 2 gets none."""
    import shutil

    from aiayn.inference import load
    from aiayn.io import read_lines
    from aiayn.run.folders import RunSpec

    shutil.copytree(workspace / "evals", tmp_path / "evals")
    extra = (f"paths.evals={tmp_path}/evals", f"paths.results={tmp_path}/results")
    ensemble = stage("ensemble")
    ensemble.SEEDS[:] = [1, 2]
    result = ensemble.run(prepare(compose(overrides(workspace, *extra))))
    assert result["seeds"] == [1, 2] and result["test"]["checkpoints_averaged"] == 5
    spec = RunSpec.of(compose(overrides(workspace, *extra)))
    hyps = read_lines(spec.ensemble_dir / "hyps.test.txt")
    runs = [dataclasses.replace(spec, seed=s).run_dir for s in (1, 2)]
    assert hyps == load(*runs).translate(read_lines(workspace / "data" / "raw" / "test.src"))
    assert ensemble.run(prepare(compose(overrides(workspace, *extra, "row=C1")))) is None  # Table 3 only
    stage("aggregate").run(
        prepare(compose(overrides(workspace, *extra, f"tables.params_file={workspace}/params.yaml")))
    )
    md = (tmp_path / "results" / "table2.md").read_text()
    assert "| Transformer (base model), ensemble of 2 seeds, ours |" in md
    rows_json = json.loads((tmp_path / "results" / "rows.json").read_text())
    assert rows_json["table2"]["base_ensemble"]["test_bleu"] == pytest.approx(result["test"]["bleu"])


@pytest.mark.parametrize("scale,patience", [("m30k_tiny", 10), ("m30k_budget", 0)])
def test_the_multi30k_reproduction_path_offline_from_a_mirror(
    shared_dir: Path, tmp_path: Path, monkeypatch, scale: str, patience: int
) -> None:
    """scale=m30k_tiny, and m30k_budget, on data=multi30k_tok (the Multi30k literature's files, sha256-checked, from a
    mirror folder named by AIAYN_MIRROR as the documented command does), shrunk to seconds: every per-run stage, the
    literature's BLEU in eval.json, and Table 2 beside the published Multi30k systems."""
    tok = shared_dir / "data" / "multi30k-tok"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for split, name in (("train", "train"), ("val", "val"), ("test_2016_flickr", "test_2016_flickr")):
        for lang in ("en", "de"):
            (mirror / f"multi30k-{name}.lc.norm.tok.{lang}").symlink_to(tok / f"{split}.lc.norm.tok.{lang}")
    monkeypatch.setenv("AIAYN_MIRROR", str(mirror))
    small = (
        "data=multi30k_tok",
        f"scale={scale}",
        f"data.cache_dir={tmp_path}/cache",
        "data.max_train_pairs=2000",
        "data.vocab_size=1000",
        "model.n_layers=1",
        "model.d_model=32",
        "model.d_ff=64",
        "model.d_k=8",
        "model.d_v=8",
        "train.max_steps=6",
        "train.batch_tokens=1024",
        "train.max_tokens=1024",
        "train.warmup_steps=4",
        "train.val_every_steps=3",
        "train.ckpt_every_steps=3",
        "train.snapshot_every_steps=3",
        "train.loss_chunk_tokens=256",
        "decode.beam_size=2",
    )
    # the smoke scale's overrides (overrides()) first, then this scale and the sizes above
    cfg = compose([*overrides(tmp_path), *small])
    assert cfg.data.mirror == str(mirror) and cfg.train.patience == patience and cfg.trainer.cpu_isa is None
    stats = stage("fetch").run(prepare(cfg))
    assert stats["valid"]["kept"] == 1014 and stats["test"]["kept"] == 1000
    stage("bpe").run(prepare(cfg))
    summary = stage("train").run(prepare(cfg))
    assert summary["steps"] == 6 and [s["from_step"] for s in summary["segments"]] == [0]
    scores = stage("evaluate").run(prepare(cfg))
    assert scores["test"]["set"]["lines"] == 1000 and scores["test"]["bleu_lc_tok"] >= 0
    assert "tok:none" in scores["test"]["bleu_lc_tok_signature"]
    (tmp_path / "params.yaml").write_text("rows: [base]\nseeds: [1]\n")
    stage("aggregate").run(
        prepare(compose([*overrides(tmp_path), *small, f"tables.params_file={tmp_path}/params.yaml"]))
    )
    table2 = (tmp_path / "results" / "table2.md").read_text()
    assert "| Transformer-tiny (Wu et al. 2021) |" in table2 and "41.02" in table2 and "ConvS2S" not in table2


def test_a_run_with_patience_resumed_midway_stops_where_it_would_have(workspace: Path, tmp_path: Path) -> None:
    """The patience counter is saved with the run (Lightning's EarlyStopping state in last.ckpt): a run cut short
    before its stop and resumed with the same settings stops at the same step with the same weights as one that ran
    through."""
    from aiayn.run.folders import RunSpec

    extra = ("train.patience=2", "train.val_every_steps=2", "train.lr_factor=30", "train.grad_clip=1")

    def cfg(where: str, max_steps: int):
        composed = compose(overrides(tmp_path / where, *extra, data=workspace / "data"))
        composed.train.max_steps = max_steps  # as an edited conf file would: the same run folder, a later stop
        return composed

    through = stage("train").run(prepare(cfg("a", 40)))
    assert through["stopped"] == "patience"
    assert stage("train").run(prepare(cfg("b", through["steps"] - 2)))["stopped"] == "max_steps"
    assert len(list((tmp_path / "b" / "runs" / "base").iterdir())) == 1  # one folder: the next run resumes it
    resumed = stage("train").run(prepare(cfg("b", 40)))
    assert resumed["stopped"] == "patience" and resumed["steps"] == through["steps"]
    assert resumed["val_loss"] == through["val_loss"] and resumed["best_val_loss"] == through["best_val_loss"]
    a, b = (torch.load(RunSpec.of(cfg(d, 40)).checkpoints / "last.ckpt", weights_only=True)["state_dict"] for d in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_parallel_launcher_gives_kept_seeds_no_share_of_the_cores(workspace: Path, tmp_path: Path) -> None:
    """pipeline/train.py as dvc.yaml runs it (hydra/launcher=parallel), for a variant (a second composition inside
    the launching process) whose two seeds are kept: the launcher asks the stage, counts both as having nothing to
    do, and runs them one at a time; nothing trains."""
    import shutil
    import subprocess
    import sys

    from aiayn.run.kept import kept_spec

    kept = tmp_path / "kept"
    here = overrides(tmp_path, f"paths.kept={kept}", data=workspace / "data")
    for seed in (1, 2):
        target = kept_spec(prepare(compose([*here, "decode.beam_size=2", f"seed={seed}"]))).eval_dir
        shutil.copytree(workspace / "evals" / "base" / f"seed{seed}", target)  # a decode variant: the same recipe
    proc = subprocess.run(
        [sys.executable, "pipeline/train.py", "-m", "hydra/launcher=parallel", *here, "decode.beam_size=2",
         "seed=1,2", "hydra.verbose=[hydra_plugins]", f"hydra.sweep.dir={tmp_path}/sweep"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=dict(os.environ, WANDB_MODE="offline"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Forking 2 job(s), 1 at a time (2 with nothing to do)" in proc.stdout + proc.stderr
    assert not list((tmp_path / "runs").rglob("*.ckpt"))


def test_kept_seeds_are_skipped_by_train_and_evaluate_and_read_by_aggregate(workspace: Path, tmp_path: Path) -> None:
    """Seeds trained and evaluated on another machine and kept (aiayn-keep, committed): on a machine with none of
    their runs, train and evaluate skip them, the ensemble is not made of the rest, and the tables read them and
    say so; a seed kept with another recipe is trained again."""
    from aiayn.run.kept import idle, keep

    kept = tmp_path / "kept"
    for seed in (1, 2):
        keep(workspace / "evals" / "base" / f"seed{seed}", kept)
    extra = (f"paths.kept={kept}", f"tables.params_file={workspace}/params.yaml")
    here = overrides(tmp_path, *extra, data=workspace / "data")
    # what the parallel launcher asks before it shares out the cores: only seed 3 would take a share
    assert [bool(idle(prepare(compose([*here, f"seed={seed}"])))) for seed in (1, 2, 3)] == [True, True, False]
    summary = stage("train").run(prepare(compose([*here, "seed=1"])))
    assert summary == json.loads((workspace / "evals" / "base" / "seed1" / "train.json").read_text())
    # nothing trained; the row's folder, the train stage's DVC output, exists even when every seed is kept
    assert list((tmp_path / "runs").rglob("*")) == [tmp_path / "runs" / "base"]
    evaluated = stage("evaluate").run(prepare(compose([*here, "seed=1"])))
    assert evaluated == json.loads((workspace / "evals" / "base" / "seed1" / "eval.json").read_text())
    assert list((tmp_path / "evals").rglob("*")) == [tmp_path / "evals" / "base"]
    ensemble = stage("ensemble")
    ensemble.SEEDS[:] = [1, 2]
    assert ensemble.run(prepare(compose(here))) is None
    stage("aggregate").run(prepare(compose(here)))
    md = (tmp_path / "results" / "table2.md").read_text()
    ours = json.loads((workspace / "results" / "rows.json").read_text())["table2"]["base"]
    assert json.loads((tmp_path / "results" / "rows.json").read_text())["table2"]["base"] == ours
    assert "Read from kept seeds: base seeds 1, 2 (" in md
    # kept with another recipe (its conf file changed since): the kept seed is not used, and the seed trains here
    config = kept / "smoke" / "synthetic" / "base" / "seed1" / "config.yaml"
    config.write_text(config.read_text().replace("label_smoothing: 0.1", "label_smoothing: 0.2"))
    assert idle(prepare(compose([*here, "seed=1"]))) is None
    stage("train").run(prepare(compose([*here, "seed=1"])))
    assert (tmp_path / "runs" / "base" / "seed1" / "train.json").is_file()
