"""Running a script as a user starts it (bench/, studies/) and reading its `RESULT name value` lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def results(output: str) -> list[tuple[str, float]]:
    """The `RESULT name value` lines of a benchmark's output, in order."""
    found = []
    for line in output.splitlines():
        if line.startswith("RESULT "):
            _, name, value = line.split()
            found.append((name, float(value)))
    return found


def run_script(script: str, *args: str, cwd: Path = REPO, **env_vars: str) -> list[tuple[str, float]]:
    """`python <script> args` (a path from the checkout's root, such as bench/decode_speed.py), which must succeed;
    its RESULT lines."""
    env = {**os.environ, "WANDB_MODE": "offline", **env_vars}
    done = subprocess.run(
        [sys.executable, str(REPO / script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return results(done.stdout)
