"""The design record: how Table 3 decides, frozen with the first table of a study (results/design.json).

The aggregate stage writes it with the pilot's table: the design's keys (params.yaml's `design`), the pilot's
seeds, and every seed of every row a table of the study has shown. Later tables keep it: a design is declared once,
before its pilot is seen. `aiayn-extend` extends only a study whose params still say what its
record says; a design changed after its pilot was seen, or a "new study" whose pilot reuses runs an earlier table showed
(a second look, e.g. extra_seeds moved into seeds), is refused. A new study on seeds no table has shown starts a new
record. DVC keeps the file between runs of the stage (`persist: true` in dvc.yaml).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aiayn.config.schema import DESIGN_KEYS as KEYS
from aiayn.config.schema import DesignConfig
from aiayn.io import atomic_write_json
from aiayn.verdicts.significance import Design

FILE = "design.json"


def declared(design: DesignConfig) -> dict[str, Any]:
    """A design's declared keys as plain values."""
    keys = asdict(design)
    return {k: keys[k] for k in KEYS}


def read(path: Path) -> dict[str, Any] | None:
    """The record at `path`, or None when no table has been made."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a design record ({err}); delete it to start a new study") from err
    if not isinstance(record, dict) or not {"design", "pilot_seeds", "shown"} <= set(record):
        raise ValueError(f"{path}: not a design record (keys design, pilot_seeds, shown); delete it to start anew")
    return record


def differences(record: Mapping[str, Any], design: Mapping[str, Any], pilot: Sequence[int]) -> list[str]:
    """What the given design and pilot change in the record's study, one sentence each (empty: the same study)."""
    out = [
        f"design.{k}: {record['design'].get(k)!r} in the record, {design.get(k)!r} now"
        for k in KEYS
        if record["design"].get(k) != design.get(k)
    ]
    if sorted(record["pilot_seeds"]) != sorted(pilot):
        out.append(f"seeds: {sorted(record['pilot_seeds'])} in the record, {sorted(pilot)} now")
    return out


def shown_seeds(record: Mapping[str, Any]) -> set[int]:
    """Every seed a table of the record's study has shown, of any row."""
    return {int(s) for seeds in record["shown"].values() for s in seeds}


def update(path: Path, design: Design, pilot: Sequence[int], seeds: Mapping[str, Sequence[int]]) -> list[str]:
    """Record the table about to be written: a first table, or one of a new study on seeds no table has shown,
    starts a record; a table of the recorded study adds the seeds it shows. A table whose design or pilot differs
    from its study's record leaves the record as it was; the differences are returned (the legend says them)."""
    record = read(path)
    now = declared(design)
    if record is not None:
        changed = differences(record, now, pilot)
        if changed and shown_seeds(record) & set(pilot):
            return changed
        if not changed:
            for row, row_seeds in seeds.items():
                record["shown"][row] = sorted(set(record["shown"].get(row, [])) | set(row_seeds))
            atomic_write_json(path, record)
            return []
    atomic_write_json(
        path, {"design": now, "pilot_seeds": sorted(pilot), "shown": {row: sorted(s) for row, s in seeds.items()}}
    )
    return []


def refuse_extension(path: Path, design: DesignConfig, pilot: Sequence[int]) -> str | None:
    """Why the study in params.yaml may not be extended (None: it may): no record, or params that changed since
    the study's record was made."""
    record = read(path)
    if record is None:
        return f"{path} not found: run `dvc repro` first; the pilot's table records its design there"
    changed = differences(record, declared(design), pilot)
    if not changed:
        return None
    again = sorted(shown_seeds(record) & set(pilot))
    why = (
        f"seeds {again} were shown by the study's tables already, so planning an extension from them is a second "
        "look at runs already seen (optional stopping). A new study needs seeds no table has shown"
        if again and sorted(record["pilot_seeds"]) != sorted(pilot)
        else "a design changed after its pilot was seen is not the design's test. Restore the recorded keys, or "
        "start a new study on seeds no table has shown"
    )
    return (
        f"params.yaml no longer says what the study's record ({path}) froze with its pilot table: "
        + "; ".join(changed)
        + f". {why}."
    )
