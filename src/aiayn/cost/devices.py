"""The measured-speed table behind `aiayn-plan` (src/aiayn/cost/devices.yaml, a data file that
gpu/gpu_check.sh writes; AIAYN_DEVICES points elsewhere), read and updated.

`record` needs only the standard library (and aiayn.io, which needs no more), so gpu/gpu_check.sh can update the
table on a GPU machine that has nothing but torch: it rewrites one `<size>: {...}` line inside one device's block and
keeps every comment.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from aiayn.io import atomic_write_text

TABLE = Path(os.environ.get("AIAYN_DEVICES", Path(__file__).with_name("devices.yaml")))  # shipped in the package
SIZES = ("base", "big")


def load(path: Path | None = None) -> dict:
    import yaml

    return yaml.safe_load(Path(path or TABLE).read_text(encoding="utf-8"))


def device_key(name: str, keys: list[str]) -> str:
    """The table's key for a device name as torch reports it ("NVIDIA H200" -> "H200")."""
    for key in sorted(keys, key=len, reverse=True):
        if key.lower() in name.lower():
            return key
    raise KeyError(f"device {name!r} is not in {TABLE.name} (known: {', '.join(keys)}); add a block for it")


def record(name: str, size: str, mfu: float, note: str, path: Path | None = None) -> str:
    """Set `<device>.<size>` to the measured `mfu` with `note` (date and how), atomically; returns the key."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    path = Path(path or TABLE)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keys = [m.group(1) for line in lines if (m := re.match(r"^([A-Za-z0-9_]+):\s*$", line))]
    key = device_key(name, keys)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == f"{key}:")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\S", lines[i])), len(lines))
    entry = f'  {size}: {{mfu: {mfu:.3f}, measured: "{note}"}}\n'
    for i in range(start + 1, end):
        if re.match(rf"^\s+{size}:", lines[i]):
            lines[i] = entry
            break
    else:
        lines.insert(start + 1, entry)
    atomic_write_text(path, "".join(lines))
    return key


if (
    __name__ == "__main__"
):  # python -m aiayn.cost.devices "NVIDIA H200" base 0.412 "2026-12-02, gpu/gpu_check.sh" [table]
    where = Path(sys.argv[5]) if len(sys.argv) > 5 else TABLE
    print(f"{where}: {record(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], where)}.{sys.argv[2]} updated")
