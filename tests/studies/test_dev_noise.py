"""studies/dev_noise.py runs on a finished pipeline's evaluations and prints its headline last."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import run_script


def test_dev_noise_reads_a_finished_pipeline(tmp_path: Path) -> None:
    """studies/dev_noise.py over evaluation folders laid out as the evaluate stage writes them (fabricated here:
    base and a row, three seeds, hypotheses of known quality)."""
    from tests.report.conftest import degrade, reference_lines, write_run

    refs = reference_lines()
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    (raw / "valid.tgt").write_text("\n".join(refs) + "\n")
    for seed, bleu in ((1, 30.0), (2, 31.0), (3, 29.5)):
        write_run(tmp_path / "evals", "base", seed, dev_bleu=bleu, dev_ppl=5.0, hyps=degrade(refs, 5))
        write_run(tmp_path / "evals", "A1", seed, dev_bleu=bleu - 1 - seed, dev_ppl=5.5, hyps=degrade(refs, 2 + seed))
    found = dict(run_script("studies/dev_noise.py", "--repo", str(tmp_path), "--samples", "50"))
    assert found["dev_noise_sentences"] == len(refs) and found["dev_noise_seed_sd_median"] > 0
    assert list(found)[-1] == "dev_noise_share_median"
