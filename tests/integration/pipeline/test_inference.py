"""A trained smoke run (the `workspace` fixture) used as fairseq's and Marian's users use theirs: n-best lists,
scoring given references, ensembles of seeds, attention alignments, through aiayn.inference and the translate
command. Each is checked against a computation that does not share its code."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from tests.integration.pipeline.test_look_inside import _translate

from aiayn.decode.beam import length_penalty
from aiayn.decode.forced import score
from aiayn.decode.search import pad_batch, search
from aiayn.decode.step import stepper
from aiayn.inference import load
from aiayn.io import read_lines
from aiayn.run import folders
from aiayn.run.folders import RunSpec


def _run(workspace: Path, seed: int = 1) -> Path:
    return RunSpec.for_row("base", seed, runs=workspace / "runs").run_dir


def _dev(workspace: Path, n: int | None = None) -> tuple[list[str], list[str]]:
    src = read_lines(workspace / "data" / "raw" / "valid.src")
    tgt = read_lines(workspace / "data" / "raw" / "valid.tgt")
    return src[:n], tgt[:n]


def test_a_hypothesis_scores_its_forced_decoding_and_the_first_is_the_translation(workspace) -> None:
    """Each n-best hypothesis's log-probability (summed inside the cached beam search) equals the same tokens
    forced through the model without a cache; its score is that over the GNMT penalty; the best is `translate`'s."""
    model = load(_run(workspace), average=1)
    sources, _ = _dev(workspace, 12)
    found = model.nbest(sources, 3)
    assert [c[0].text for c in found] == model.translate(sources)
    for source, candidates in zip(sources, found):
        assert len(candidates) == 3 and [c.score for c in candidates] == sorted(
            (c.score for c in candidates), reverse=True
        )
        forced = score(model.models[0], model.tokenizer, [source] * 3, [c.tokens for c in candidates])
        for c, f in zip(candidates, forced):
            assert f is not None and f.tokens == len(c.tokens) + 1  # EOS counted
            assert c.logprob == pytest.approx(f.logprob, rel=1e-4, abs=1e-4)
            assert c.score == pytest.approx(c.logprob / length_penalty(len(c.tokens) + 1, 0.6), rel=1e-6)


def test_the_power_norm_rescores_the_same_hypotheses_and_the_command_takes_it(workspace, monkeypatch, capsys):
    """--length-norm power (fairseq's --lenpen): scores are logprob / |Y|^alpha, |Y| counting EOS, and the
    run's translations are the power norm's best."""
    run = _run(workspace)
    model = load(run, average=1)
    sources, _ = _dev(workspace, 8)
    found = model.nbest(sources, 2, alpha=1.0, length_norm="power")
    for candidates in found:
        for c in candidates:
            assert c.score == pytest.approx(c.logprob / (len(c.tokens) + 1), rel=1e-6)
    assert [c[0].text for c in found] == model.translate(sources, alpha=1.0, length_norm="power")
    status, nbest, _ = _translate(
        monkeypatch,
        capsys,
        sources,
        str(run),
        "--nbest",
        "2",
        "--alpha",
        "1.0",
        "--length-norm",
        "power",
        "--average",
        "1",
    )
    assert status == 0 and [float(line.split(" ||| ")[3]) for line in nbest] == pytest.approx(
        [c.score for candidates in found for c in candidates], abs=1e-5
    )
    with pytest.raises(ValueError, match="length_norm must be one of"):
        model.settings(length_norm="fairseq")


def test_scores_over_the_dev_set_give_the_evaluate_stages_perplexity(workspace) -> None:
    """Scoring the references: exp(-total log-prob / tokens) over dev is eval.json's dev PPL, which
    aiayn.eval.perplexity computes with cross-entropy over the dev batches (the same last checkpoint)."""
    model = load(_run(workspace), average=1)
    sources, references = _dev(workspace)
    scores = model.score(sources, references)
    total, tokens = sum(s.logprob for s in scores), sum(s.tokens for s in scores)
    ev = json.loads(
        (
            RunSpec.for_row("base", 1, runs=workspace / "runs", evals=workspace / "evals").eval_dir / folders.EVAL
        ).read_text()
    )
    assert math.exp(-total / tokens) == pytest.approx(ev["dev"]["ppl"], rel=1e-5)
    assert scores[0].ppl == pytest.approx(math.exp(-scores[0].logprob / scores[0].tokens))


def test_an_ensemble_of_one_is_the_run_and_of_two_the_stepwise_mean(workspace) -> None:
    """One run as an ensemble decodes exactly as the run; two runs' greedy search takes, at every step, the argmax of
    the mean of their log-probabilities, recomputed here from each model's own teacher-forced logits."""
    one, two = load(_run(workspace), average=1), load(_run(workspace), _run(workspace, 2), average=1)
    sources, references = _dev(workspace, 8)
    tok = one.tokenizer
    src_ids = [tok.encode([s])[0] + [tok.eos_id] for s in sources]
    src = pad_batch(src_ids, tok.pad_id, "cpu")
    single = stepper([one.models[0]], src, pad_id=tok.pad_id, bos_id=tok.bos_id, repeats=1, incremental=True)
    ref = stepper(one.models[0], src, pad_id=tok.pad_id, bos_id=tok.bos_id, repeats=1, incremental=True)
    prefix = torch.full((len(sources), 1), tok.bos_id)
    with torch.inference_mode():
        assert torch.equal(single.log_probs(prefix), ref.log_probs(prefix))
    with torch.inference_mode():
        for _ in range(3):  # and after a few steps of the same prefixes, caches included
            a, b = single.log_probs(prefix), ref.log_probs(prefix)
            assert torch.equal(a, b)
            prefix = torch.cat([prefix, a.argmax(-1, keepdim=True)], dim=1)
    # Two runs, greedy: each step by hand from the two models' full teacher-forced log-probabilities.
    limit_b = two.cfg.decode.max_len_b
    outputs = search(two.models, tok, sources, strategy="greedy", beam_size=1, alpha=0.0, max_len_b=limit_b)
    for source, output in zip(src_ids, outputs):
        prefix, s = [tok.bos_id], torch.tensor([source])
        with torch.inference_mode():
            for step in range(len(source) + limit_b + 1):  # at the limit only EOS (section 6.1's input + b)
                lp = torch.stack([m(s, torch.tensor([prefix]))[0, -1].log_softmax(-1) for m in two.models]).mean(0)
                lp[tok.pad_id] = lp[tok.bos_id] = -math.inf
                prefix.append(tok.eos_id if step == len(source) + limit_b else int(lp.argmax()))
                if prefix[-1] == tok.eos_id:
                    break
        assert prefix[1:-1] == output
    assert any(outputs)
    # Scores: the ensemble's per-token log-probabilities are the mean of the runs', so its sums are too.
    s1, s2, s12 = (m.score(sources, references) for m in (one, load(_run(workspace, 2), average=1), two))
    for a, b, ab in zip(s1, s2, s12):
        assert ab.logprob == pytest.approx((a.logprob + b.logprob) / 2, rel=1e-5)
    assert all(abs(a.logprob - b.logprob) > 1e-3 for a, b in zip(s1, s2))  # two different models


def test_alignment_rows_are_attention_over_the_source(workspace) -> None:
    model = load(_run(workspace), average=1)
    sources, references = _dev(workspace, 4)
    aligned = model.align(sources, references, layer=-1)
    for source, reference, a in zip(sources, references, aligned):
        n_src, n_tgt = len(model.tokenizer.encode([source])[0]) + 1, len(model.tokenizer.encode([reference])[0]) + 1
        assert len(a.weights) == n_tgt and all(len(row) == n_src for row in a.weights)
        assert all(sum(row) == pytest.approx(1.0, abs=1e-4) for row in a.weights)  # a softmax over the source
        assert [t for _, t in sorted(a.hard, key=lambda p: p[1])] == list(range(n_tgt - 1))  # one per target token
        for s, t in a.hard:
            assert a.weights[t][s] == max(a.weights[t][: n_src - 1])
    head0 = model.align(sources[:1], references[:1], layer=0, head=0)[0]
    assert head0.weights != aligned[0].weights
    with pytest.raises(ValueError, match="layers 0..2"):
        model.align(sources[:1], references[:1], layer=3)
    with pytest.raises(ValueError, match="heads 0..3"):
        model.align(sources[:1], references[:1], head=4)


def test_the_translate_command_writes_nbest_lists_scores_and_alignments(workspace, monkeypatch, capsys, tmp_path):
    run = str(_run(workspace))
    sources, references = _dev(workspace, 5)
    lines = [sources[0], "", *sources[1:]]
    status, plain, _ = _translate(monkeypatch, capsys, lines, run)
    assert status == 0 and len(plain) == 6
    status, nbest, _ = _translate(monkeypatch, capsys, lines, run, "--nbest", "2")
    fields = [line.split(" ||| ") for line in nbest]
    assert status == 0 and [f[0] for f in fields] == ["0", "0", "2", "2", "3", "3", "4", "4", "5", "5"]
    firsts = {int(f[0]): f[1] for f in reversed(fields)}
    assert [firsts.get(i, "") for i in range(6)] == plain  # the empty line has no hypotheses
    assert all(f[2].startswith("logprob= ") and float(f[3]) < 0 for f in fields)
    refs = tmp_path / "refs.de"
    refs.write_text("".join(r + "\n" for r in [references[0], "", *references[1:]]))
    status, scored, _ = _translate(monkeypatch, capsys, lines, run, "--score", str(refs))
    assert status == 0 and scored[1] == "" and len(scored) == 6
    logprob, tokens, mean, ppl = scored[0].split("\t")
    assert float(mean) == pytest.approx(float(logprob) / int(tokens), rel=1e-5) and float(ppl) > 1
    refs.write_text("one line\n")
    status, _, err = _translate(monkeypatch, capsys, lines, run, "--score", str(refs))
    assert status == 2 and "has 1 lines, stdin 6" in err
    status, aligned, _ = _translate(monkeypatch, capsys, lines, run, "--align", "-1")
    assert status == 0 and [a.split(" ||| ")[0] for a in aligned] == plain
    assert all(p.count("-") == 1 for a in aligned if a.split(" ||| ")[1] for p in a.split(" ||| ")[1].split())
    status, ensemble, _ = _translate(monkeypatch, capsys, lines, run, run)
    assert status == 0 and ensemble == plain  # a run twice is that run
