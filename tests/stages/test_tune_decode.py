"""Dev-set choice of beam size and alpha: the chooser on written scores, and the real Hydra multirun sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from tests.integration.pipeline.smoke import stage

from aiayn.config.composition import CONF_DIR, compose
from aiayn.config.resolve import ConfigError, prepare
from aiayn.stages.tune_decode import (
    prune_stale,
    rank_key,
    read_results,
    setting_name,
    tune_decode,
    write_choice,
)

REPO = Path(__file__).resolve().parents[2]
CONTEXT = {"checkpoints": [{"name": "step-00000012.ckpt", "size": 1, "mtime_ns": 1}], "max_len_b": 50, "dev_lines": 3}


def write_result(
    folder: Path, beam: int, alpha: float, bleu: float, context: dict = CONTEXT, norm: str | None = None
) -> None:
    result = {
        "beam_size": beam,
        "length_penalty": alpha,
        **({} if norm is None else {"length_norm": norm}),
        "dev_bleu": bleu,
        "dev_chrf": bleu + 10,
        "dev_sentences_per_s": 100.0 / beam,
        "context": context,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{setting_name(beam, alpha, norm or 'gnmt')}.json").write_text(json.dumps(result))


def chosen_of(folder: Path) -> tuple[int, float]:
    chosen = json.loads((folder / "chosen.json").read_text())
    return chosen["beam_size"], chosen["length_penalty"]


def test_setting_name_spells_floats_like_hydra() -> None:
    assert setting_name(4, 0.6) == "beam4-lp0.6" and setting_name(1, 0) == "beam1-lp0.0"


def test_highest_dev_bleu_wins_over_smaller_beam(tmp_path: Path) -> None:
    for beam, alpha, bleu in ((1, 0.6, 20.0), (4, 0.6, 21.5), (4, 1.0, 21.4), (8, 0.0, 19.0)):
        write_result(tmp_path, beam, alpha, bleu)
    chosen = write_choice(tmp_path)
    assert chosen_of(tmp_path) == (4, 0.6) and chosen["overrides"] == [
        "decode.beam_size=4",
        "decode.length_penalty=0.6",
        "decode.length_norm=gnmt",
    ]
    assert [s["dev_bleu"] for s in chosen["settings"]] == [21.5, 21.4, 20.0, 19.0]
    table = (tmp_path / "table.md").read_text().splitlines()
    assert len(table) == 2 + 4 and table[2].endswith("| * |") and not table[3].endswith("| * |")


def test_ties_go_to_smaller_beam_then_alpha_nearer_the_papers(tmp_path: Path) -> None:
    for beam, alpha in ((8, 0.6), (2, 1.0), (2, 0.4), (4, 0.6)):
        write_result(tmp_path / "beam", beam, alpha, 25.0)
    write_choice(tmp_path / "beam")
    assert chosen_of(tmp_path / "beam") == (2, 0.4)
    for alpha in (0.0, 1.0, 0.8, 0.4):  # 0.8 and 0.4 are equally near 0.6: the smaller alpha, deterministically
        write_result(tmp_path / "alpha", 4, alpha, 25.0)
    write_choice(tmp_path / "alpha")
    assert chosen_of(tmp_path / "alpha") == (4, 0.4)


def test_the_length_norm_is_a_setting_of_its_own(tmp_path: Path) -> None:
    # A result without length_norm (written before the key) is the paper's gnmt; on a tie the paper's norm wins.
    write_result(tmp_path / "tie", 5, 1.0, 30.0, norm="power")
    write_result(tmp_path / "tie", 5, 1.0, 30.0)
    assert sorted(p.name for p in (tmp_path / "tie").glob("*.json")) == ["beam5-lp1.0-power.json", "beam5-lp1.0.json"]
    assert write_choice(tmp_path / "tie")["length_norm"] == "gnmt"
    write_result(tmp_path / "wins", 5, 0.6, 30.0)
    write_result(tmp_path / "wins", 5, 1.0, 30.5, norm="power")
    chosen = write_choice(tmp_path / "wins")
    assert chosen["setting"] == "beam5-lp1.0-power" and chosen["overrides"][-1] == "decode.length_norm=power"
    assert "| 5 | 1 | power | 30.5 |" in (tmp_path / "wins" / "table.md").read_text()
    cfg = prepare(compose([f"hydra.searchpath=[file://{tmp_path / 'wins'}]", "decode=tuned"]))
    assert (cfg.decode.beam_size, cfg.decode.length_penalty, cfg.decode.length_norm) == (5, 1.0, "power")


def test_tuned_yaml_composes_as_a_decode_option(tmp_path: Path) -> None:
    write_result(tmp_path, 2, 1.0, 30.0)
    write_choice(tmp_path)
    cfg = prepare(compose([f"hydra.searchpath=[file://{tmp_path}]", "decode=tuned"]))
    assert (cfg.decode.strategy, cfg.decode.beam_size, cfg.decode.length_penalty, cfg.decode.max_len_b) == (
        "beam",
        2,
        1.0,
        50,
    )


def test_bad_folders_fail_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no beam"):
        read_results(tmp_path)
    write_result(tmp_path, 1, 0.6, 10.0)
    write_result(tmp_path, 4, 0.6, 12.0, context={**CONTEXT, "max_len_b": 10})
    with pytest.raises(ValueError, match=r"beam4-lp0\.6\.json.*other checkpoints"):
        write_choice(tmp_path)
    (tmp_path / "beam4-lp0.6.json").write_text(json.dumps({"beam_size": 4}))
    with pytest.raises(ValueError, match=r"beam4-lp0\.6\.json: missing keys"):
        read_results(tmp_path)


def test_prune_stale_removes_only_other_contexts(tmp_path: Path) -> None:
    write_result(tmp_path, 1, 0.6, 10.0, context={**CONTEXT, "dev_lines": 99})
    (tmp_path / "beam1-lp0.6.hyps.txt").write_text("old\n")
    write_result(tmp_path, 4, 0.6, 12.0)
    prune_stale(tmp_path, CONTEXT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beam4-lp0.6.json"]


def test_the_sweep_config_holds_the_grid() -> None:
    sweep = OmegaConf.load(CONF_DIR / "tune" / "decode.yaml").hydra.sweeper.params
    assert sweep["decode.beam_size"] == "1,2,4,8" and sweep["decode.length_penalty"] == "0.0,0.6,1.0"


def test_greedy_strategy_is_refused() -> None:
    with pytest.raises(ConfigError, match="decode.strategy"):
        tune_decode(prepare(compose(["decode=greedy", "logger=none"])))


def overrides(tmp: Path) -> list[str]:
    # A test set of another size than dev shows which split was decoded.
    return [
        "scale=smoke",
        "logger=none",
        "trainer.enable_progress_bar=false",
        "trainer.cpu_isa=null",  # pytest's process keeps the machine's kernels (tests/integration/pipeline/smoke.py)
        "train.max_steps=4",
        "data.valid_size=12",
        "data.test_size=8",
        "decode.max_len_b=10",
        f"paths.raw={tmp}/data/raw",
        f"paths.bpe={tmp}/data/bpe",
        f"paths.runs={tmp}/runs",
        f"paths.tuning={tmp}/tuning",
    ]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """fetch -> bpe -> train at smoke scale, then the 2x2 sweep through the real Hydra multirun entry point."""
    tmp = tmp_path_factory.mktemp("tune")
    for name in ("fetch", "bpe", "train"):
        stage(name).run(prepare(compose(overrides(tmp))))
    # One intra-op thread: tiny tensors on shared cores decode several times faster than with a contended pool.
    env = dict(os.environ, WANDB_MODE="offline", HYDRA_FULL_ERROR="1", OMP_NUM_THREADS="1")
    args = [
        sys.executable,
        "pipeline/tune_decode.py",
        "-m",
        "+tune=decode",
        "row=base",
        "seed=1",
        *overrides(tmp),
        f"hydra.sweep.dir={tmp}/multirun",
        "decode.beam_size=1,3",
        "decode.length_penalty=0.0,0.6",
    ]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return tmp


def test_sweep_writes_every_setting_and_chooses_the_best(swept: Path) -> None:
    (folder,) = (swept / "tuning" / "base").glob("**/seed1")  # the run's folder: max_steps=4 makes a variant
    names = sorted(p.stem for p in folder.glob("beam*-lp*.json"))
    assert names == ["beam1-lp0.0", "beam1-lp0.6", "beam3-lp0.0", "beam3-lp0.6"]
    results = read_results(folder)
    best = min(results, key=rank_key)
    assert best["dev_bleu"] == max(r["dev_bleu"] for r in results)
    assert chosen_of(folder) == (best["beam_size"], best["length_penalty"])
    assert len(json.loads((folder / "chosen.json").read_text())["settings"]) == 4
    for r in results:  # dev only: 12 dev lines, the test split has 8
        assert r["context"]["dev_lines"] == 12 and r["context"]["max_len_b"] == 10
        assert len((folder / r["file"].replace(".json", ".hyps.txt")).read_text().splitlines()) == 12
    tuned = OmegaConf.load(folder / "decode" / "tuned.yaml")
    assert (tuned.beam_size, tuned.length_penalty) == chosen_of(folder)
    # Hydra's job folders spell the norm always, the result files only when it is not the paper's
    assert sorted(p.name for p in (swept / "multirun" / "base-seed1").iterdir()) == [f"{n}-gnmt" for n in names]
