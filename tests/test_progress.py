"""Plain progress lines: rate, elapsed, ETA, at most one per interval and one at the end."""

from __future__ import annotations

import logging

from aiayn.progress import Progress, clock, eta


def test_clock_and_eta():
    assert clock(3725.4) == "1:02:05" and clock(-1) == "0:00:00"
    assert eta(25, 100, 10.0) == "0:00:30" and eta(0, 100, 10.0) == "?"


def test_lines_at_most_every_interval_and_at_the_end(caplog):
    progress = Progress("decode valid", 10, "sentences", every_s=3600)
    with caplog.at_level(logging.INFO, logger="aiayn.progress"):
        for _ in range(10):
            progress.update()
        assert caplog.messages == []  # the interval has not passed
        progress.finish()
    assert len(caplog.messages) == 1 and caplog.messages[0].startswith("decode valid: 10/10 sentences (100%)")
    assert "ETA 0:00:00" in caplog.messages[0]
    caplog.clear()
    every = Progress("clean train", None, "pairs read", every_s=0.0)
    with caplog.at_level(logging.INFO, logger="aiayn.progress"):
        every.update(5)
        every.update(5)
    assert [m.split(",")[0] for m in caplog.messages] == ["clean train: 5 pairs read", "clean train: 10 pairs read"]
