"""Looking inside the smoke workspace's trained base run: `aiayn-translate` gives the evaluate
stage's hypotheses, keeps every line, refuses an unfinished run; the attention figures, from the attention_figures stage
and `aiayn-attention`."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from aiayn.inference.attention import figure_names, look, pick_sentences
from aiayn.inference.attention import main as attention_main
from aiayn.inference.trained import open_run
from aiayn.inference.translate import main as translate_main
from aiayn.io import read_lines
from aiayn.run import folders
from aiayn.run.folders import RunSpec
from aiayn.stages.attention_figures import FIGURE_DIR


def _run_dir(workspace: Path) -> Path:
    return RunSpec.for_row("base", 1, runs=workspace / "runs").run_dir


def _eval_dir(workspace: Path) -> Path:
    return RunSpec.for_row("base", 1, runs=workspace / "runs", evals=workspace / "evals").eval_dir


def _translate(monkeypatch, capsys, lines: list[str], *args: str) -> tuple[int, list[str], str]:
    """aiayn.inference.translate's main on `lines` as stdin: its status, stdout lines and stderr."""
    capsys.readouterr()
    stdin = io.TextIOWrapper(io.BytesIO("".join(line + "\n" for line in lines).encode("utf-8")), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    status = translate_main(list(args))
    out = capsys.readouterr()
    return status, out.out.split("\n")[:-1], out.err


@pytest.mark.parametrize("split, average", [("valid", ["--average", "1"]), ("test", [])])
def test_translate_writes_the_hypotheses_the_evaluate_stage_wrote(workspace, monkeypatch, capsys, split, average):
    """dev: the last checkpoint (--average 1), as Table 3; test: by default the row's average_last (5), as Table 2;
    both with the run's own decode settings (beam 4, alpha 0.6)."""
    sources = read_lines(workspace / "data" / "raw" / f"{split}.src")
    status, hyps, _ = _translate(monkeypatch, capsys, sources, str(_run_dir(workspace)), *average)
    assert status == 0
    assert hyps == read_lines(_eval_dir(workspace) / folders.hyps_file(split))


def test_translate_keeps_empty_and_over_long_lines_in_place(workspace, monkeypatch, capsys, caplog):
    sources = read_lines(workspace / "data" / "raw" / "valid.src")
    long = " ".join(sources) * 3  # beyond the smoke model's 256 positions
    status, out, _ = _translate(
        monkeypatch, capsys, [sources[0], "", long, sources[1], "   "], str(_run_dir(workspace)), "--greedy"
    )
    assert status == 0 and len(out) == 5
    assert out[1] == "" and out[4] == "" and out[0] and out[2] and out[3]
    assert "sentence 3:" in caplog.text and "max_positions=256" in caplog.text  # on stderr, outside pytest


def test_translate_refuses_an_unfinished_run_naming_what_it_lacks(workspace, monkeypatch, capsys, tmp_path):
    unfinished = tmp_path / "seed1"
    unfinished.mkdir()
    shutil.copy(_run_dir(workspace) / folders.CONFIG, unfinished / folders.CONFIG)  # a run that just started
    status, out, err = _translate(monkeypatch, capsys, ["a sentence"], str(unfinished))
    assert status == 2 and out == []
    assert "not a finished run" in err and folders.TRAIN_SUMMARY in err and f"{folders.CHECKPOINTS}/*.ckpt" in err
    status, _, err = _translate(monkeypatch, capsys, ["a sentence"], str(tmp_path / "nowhere"))
    assert status == 2 and "no such folder" in err


def test_the_figures_are_of_the_attention_the_run_computed(workspace) -> None:
    run = open_run(_run_dir(workspace))
    sentence = read_lines(workspace / "data" / "raw" / "valid.src")[0]
    looked = look(run, sentence)
    n_layers, heads = run.model.cfg.n_layers, run.model.cfg.n_heads
    assert len(looked.encoder) == len(looked.cross) == n_layers
    assert looked.source[-1] == looked.target[-1] == "</s>"
    for enc, cross in zip(looked.encoder, looked.cross):
        assert enc.shape == (heads, len(looked.source), len(looked.source))
        assert cross.shape == (heads, len(looked.target), len(looked.source))
        np.testing.assert_allclose(enc.sum(-1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(cross.sum(-1), 1.0, rtol=1e-5)
    # the translation drawn is the one the run gives with its decode settings
    assert looked.translation == run.decoding.translate(run.model, run.tokenizer, [sentence], "x")[0]


def test_the_figure_stage_draws_base_seed1_on_the_dev_sentences_the_rule_picks(workspace) -> None:
    raw = workspace / "data" / "raw"
    picked = pick_sentences(read_lines(raw / "valid.src"), read_lines(raw / "valid.tgt"))
    assert picked, "the rule always picks a sentence"
    expected = {name for index, _ in picked for name in figure_names(f"base-s1-dev{index + 1}", 3)}
    drawn = workspace / "results" / FIGURE_DIR
    assert {p.name for p in drawn.iterdir()} == expected
    assert all((drawn / name).read_bytes().startswith(b"\x89PNG") for name in expected)


def test_the_attention_command_draws_any_sentence_at_any_layer(workspace, tmp_path, capsys) -> None:
    run_dir = str(_run_dir(workspace))
    assert attention_main([run_dir, "The dog sees the ball.", "--layer", "1", "--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} == set(figure_names("sentence", 1))
    assert "translation: " in capsys.readouterr().out
    assert attention_main([run_dir, "The dog sees the ball.", "--layer", "4", "--out", str(tmp_path)]) == 2
    assert "layers 1 to 3" in capsys.readouterr().err
