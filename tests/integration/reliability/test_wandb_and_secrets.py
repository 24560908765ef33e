"""wandb can fail in every way without stopping a run; credentials never reach a file the pipeline writes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from aiayn.config.composition import compose
from aiayn.config.resolve import prepare
from aiayn.run import tracking

FAKE_KEY = "f4k3" * 10  # 40 characters, like a real wandb key


def test_misconfigured_wandb_is_skipped_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = prepare(compose(["scale=smoke", "logger.mode=bogus", f"logger.dir={tmp_path}"]))
    with caplog.at_level(logging.WARNING, logger="aiayn.run.tracking"):
        assert tracking.start_run(cfg, job_type="train") is None
    assert "wandb disabled for this run" in caplog.text


def test_unreachable_wandb_server_gives_up_within_init_timeout(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # the discard port: connection refused
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    cfg = prepare(compose(["scale=smoke", "logger.init_timeout=3", f"logger.dir={tmp_path}"]))
    with caplog.at_level(logging.WARNING, logger="aiayn.run.tracking"):
        assert tracking.start_run(cfg, job_type="train") is None
    assert "wandb disabled for this run" in caplog.text and FAKE_KEY not in caplog.text


def test_wandb_crashing_mid_run_does_not_change_or_stop_training(
    stage, overrides, reference, exact, tmp_path, monkeypatch, caplog
):
    import wandb.sdk.wandb_run

    def crash(self, *args, **kwargs):
        raise ConnectionError("wandb service died")

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)  # also the fast tier's check that no file gets the key
    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", crash)
    with caplog.at_level(logging.WARNING, logger="aiayn.run.tracking"):
        stage("train").run(prepare(compose(overrides(tmp_path, "logger=wandb", f"logger.dir={tmp_path}"))))
    run_dir = tmp_path / "runs" / "base" / "seed1"
    assert exact(run_dir) == exact(reference)  # the run's own files hold everything wandb missed
    assert caplog.text.count("wandb log_metrics failed") == 1  # logged once, then wandb is left alone
    assert (tmp_path / "wandb").is_dir() and files_containing(tmp_path, FAKE_KEY.encode()) == []


def test_a_credential_in_the_config_is_refused_without_echoing_it(stage, overrides, tmp_path):
    for script in ("train", "evaluate"):
        with pytest.raises(ValueError, match="config key logger.api_key looks like a credential") as info:
            stage(script).run(prepare(compose(overrides(tmp_path, f"+logger.api_key={FAKE_KEY}"))))
        assert FAKE_KEY not in str(info.value)
    assert not (tmp_path / "runs").exists()


def test_scrub_keeps_token_counts_and_drops_credentials():
    cleaned = tracking.scrub(
        {
            "train": {"max_tokens": 1, "batch_tokens": 2, "hf_token": "x", "api_key": "y"},
            "mirror": f"https://user:{FAKE_KEY}@host",
        },
        secrets=[FAKE_KEY],
    )
    assert cleaned == {"train": {"max_tokens": 1, "batch_tokens": 2}, "mirror": "https://user:***@host"}


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_the_api_key_appears_in_no_file_or_log_of_any_stage(stage, overrides, cli, data_dir, tmp_path, monkeypatch):
    """fetch, bpe, train (from the command line, as DVC runs it), evaluate, aggregate with an API key set."""
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    monkeypatch.setenv("WANDB_MODE", "offline")
    args = overrides(
        tmp_path,
        "logger=wandb",
        f"logger.dir={tmp_path}",
        f"paths.raw={tmp_path}/data/raw",
        f"paths.bpe={tmp_path}/data/bpe",
        "tables.rows=[base]",
        "tables.seeds=[1]",
        "decode=greedy",
        "decode.bootstrap=10",
    )
    stage("fetch").run(prepare(compose(args)))
    stage("bpe").run(prepare(compose(args)))
    train = cli("train", [*args, f"hydra.run.dir={tmp_path}/outputs/train"], tmp_path)
    output = train.communicate(timeout=600)[0]
    assert train.returncode == 0, output[-3000:]
    stage("evaluate").run(prepare(compose(args)))
    stage("aggregate").run(prepare(compose(args)))
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.match("*/.hydra/config.yaml") for p in written) and any("wandb" in p.parts for p in written)
    assert (tmp_path / "results" / "table3.csv").exists() and os.environ["WANDB_API_KEY"] == FAKE_KEY
    assert FAKE_KEY not in output
    assert files_containing(tmp_path, FAKE_KEY.encode()) == []
