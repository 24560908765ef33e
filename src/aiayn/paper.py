"""The paper's published numbers (Tables 2 and 3 of Vaswani et al. 2017), read from packaged YAML."""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

from omegaconf import OmegaConf

_TABLES_FILE = "paper_tables.yaml"
_PUBLISHED_FILE = "published.yaml"  # other test sets' published numbers (Multi30k)
# Row groups of Table 3 in the paper's order; a group of one entry is named by its letter alone ("E").
_GROUPS = ("A", "B", "C", "D", "E")
_RESULTS = ("bleu_dev", "ppl_dev")  # what each row of Table 3 must give itself


def _load() -> dict[str, Any]:
    """The packaged copy of the paper's tables (a fresh dict on every call: callers may mutate it)."""
    return copy.deepcopy(_parsed())


@functools.lru_cache(maxsize=1)
def _parsed() -> dict[str, Any]:
    """Parse the packaged copy of the paper's tables, once a process."""
    text = resources.files("aiayn").joinpath(_TABLES_FILE).read_text(encoding="utf-8")
    # OmegaConf's YAML loader, because PyYAML (YAML 1.1) reads "3.3e18" (no dot, no exponent sign) as a string.
    tables = OmegaConf.to_container(OmegaConf.create(text))
    if not isinstance(tables, dict) or "table3" not in tables or "table2" not in tables:
        raise ValueError(f"aiayn/report/{_TABLES_FILE}: expected top-level keys 'table2' and 'table3'")
    return {str(k): v for k, v in tables.items()}


def paper_table3() -> dict[str, dict[str, Any]]:
    """Table 3 rows by our row name (base, A1..A4, B1, B2, C1..C7, D1..D4, E, big).

    Blank settings (and parameter counts) are "identical to those of the base model" (Table 3 caption), so the base
    values fill them. Every row must give its own dev BLEU and PPL: a missing one is an error, never base's value
    (which would make its difference 0, "no difference").
    """
    table = _load()["table3"]
    base = dict(table["base"])
    rows: dict[str, dict[str, Any]] = {"base": copy.deepcopy(base)}
    given = {"base": ("table3.base", base)}
    for group in _GROUPS:
        variants = table.get(group)
        if not isinstance(variants, list):
            raise ValueError(f"aiayn/report/{_TABLES_FILE}: table3.{group} must be a list of rows")
        for i, delta in enumerate(variants, start=1):
            name = group if len(variants) == 1 else f"{group}{i}"
            rows[name], given[name] = {**base, **delta}, (f"table3.{group}[{i - 1}]", delta)
    rows["big"], given["big"] = {**base, **table["big"]}, ("table3.big", table["big"])
    for name, (where, entry) in given.items():
        missing = [key for key in _RESULTS if not isinstance(entry.get(key), (int, float))]
        if missing:
            raise ValueError(
                f"aiayn/report/{_TABLES_FILE}: {where} (row {name}) has no {', '.join(missing)}: "
                f"every row gives its own results"
            )
    return rows


def paper_base_bleu() -> float:
    """The paper's base dev BLEU (Table 3: 25.8), what our BLEU is scaled against off the paper's setting."""
    return float(_parsed()["table3"]["base"]["bleu_dev"])


def paper_base_ppl() -> float:
    """The paper's base dev perplexity (Table 3: 4.92), what our log PPL is scaled against off the paper's setting."""
    return float(_parsed()["table3"]["base"]["ppl_dev"])


def paper_table2() -> list[dict[str, Any]]:
    """Table 2 rows in the paper's order: model, en_de/en_fr BLEU and cost_en_de/cost_en_fr (or cost) in FLOPs."""
    return [dict(row) for row in _load()["table2"]]


def paper_bleu_and_cost(model: str, pair: str) -> tuple[float | None, float | None]:
    """The paper's Table 2 BLEU and training cost for one system and language pair (e.g. "en_de")."""
    for row in paper_table2():
        if row["model"] == model:
            # The Transformer rows give one cost for both pairs; the other systems give one per pair.
            return row.get(pair), row.get(f"cost_{pair}", row.get("cost"))
    raise KeyError(f"no system {model!r} in the paper's Table 2")


@functools.lru_cache(maxsize=1)
def _published() -> dict[str, Any]:
    text = resources.files("aiayn").joinpath(_PUBLISHED_FILE).read_text(encoding="utf-8")
    parsed = OmegaConf.to_container(OmegaConf.create(text))
    if not isinstance(parsed, dict):
        raise ValueError(f"aiayn/report/{_PUBLISHED_FILE}: expected a mapping of data set names")
    entries: dict[str, Any] = {str(k): v for k, v in parsed.items()}
    for data, entry in entries.items():
        for i, system in enumerate(entry.get("systems") or ()):
            missing = [k for k in ("system", "bleu", "source") if system.get(k) is None]
            if missing:
                raise ValueError(f"aiayn/report/{_PUBLISHED_FILE}: {data}.systems[{i}] has no {', '.join(missing)}")
    return entries


def published(data: str | None) -> dict[str, Any] | None:
    """Published results on data set `data` (a data.name, e.g. "multi30k"): test (its test set's name), column (the
    BLEU flavour they are in, a Table 2 column key) and systems (system, bleu, source, optional ci95 and note);
    None for data sets whose published reference is the paper's Table 2 (or that have none)."""
    entry = _published().get(data or "")
    return copy.deepcopy(entry) if entry else None
