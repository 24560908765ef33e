"""Atomic writers and cell formatting shared by the Table 2 and Table 3 writers (markdown, CSV, booktabs)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
DASH = "—"


@dataclass(frozen=True)
class Column:
    """One column of a table as shown (markdown, LaTeX) and the CSV keys behind it, in the order the CSV has them.

    `header` None: a CSV-only column. `cell` formats a row's shown cell (default: its first key's value, or a
    dash). `metrics`: the headline numbers this column gives `dvc metrics show` / `dvc exp show`
    (results/metrics.json), each a name and how to get it from a row; most columns give none.
    """

    header: str | None
    keys: tuple[str, ...]
    cell: Callable[[Mapping[str, Any]], str] | None = None
    metrics: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = ()

    def show(self, row: Mapping[str, Any]) -> str:
        if self.cell is not None:
            return self.cell(row)
        value = row.get(self.keys[0])
        return DASH if value is None else str(value)


def csv_columns(columns: Sequence[Column]) -> tuple[str, ...]:
    """Every CSV key of a table, in order."""
    return tuple(k for c in columns for k in c.keys)


def shown(columns: Sequence[Column], rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The header and body of the shown table (markdown, LaTeX)."""
    visible = [c for c in columns if c.header is not None]
    return [c.header or "" for c in visible], [[c.show(r) for c in visible] for r in rows]


def metrics(columns: Sequence[Column], row: Mapping[str, Any]) -> dict[str, Any]:
    """One table row's headline numbers for results/metrics.json (the columns' `metrics`, undefined ones left out)."""
    out = {}
    for c in columns:
        for name, get in c.metrics:
            value = get(row)
            if value is not None:
                out[name] = value
    return out


def half_width(low: Any, high: Any) -> float | None:
    """Half a symmetric interval's width, or None without one."""
    return None if low is None or high is None else (high - low) / 2


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """CSV with the given columns; None becomes an empty cell (undefined, never 0 or NaN)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return buf.getvalue()


def num(x: float | None, digits: int = 2) -> str:
    """A number, or an em dash when undefined."""
    return DASH if x is None else f"{x:.{digits}f}"


def signed(x: float | None, digits: int = 2) -> str:
    """A difference with its sign, or an em dash."""
    return DASH if x is None else f"{x:+.{digits}f}"


def sci(x: float | None) -> str:
    """FLOPs in the paper's style (3.3e18), or an em dash."""
    return DASH if x is None else f"{x:.1e}"


def mean_pm(mean: float | None, low: float | None, high: float | None, digits: int = 2, sign: bool = False) -> str:
    """ "mean ± half-width" of a symmetric interval; the bare mean when there is no interval."""
    text = signed(mean, digits) if sign else num(mean, digits)
    if mean is None or low is None or high is None:
        return text
    return f"{text} ± {(high - low) / 2:.{digits}f}"


def ci_cells(key: str, sign: bool = False) -> tuple[tuple[str, ...], Callable[[Mapping[str, Any]], str]]:
    """A mean with its 95% CI as a Column's CSV keys (`{key}_mean`, or `key` itself for a delta, then
    `{key}_ci95_low`, `{key}_ci95_high`) and its cell, "mean ± half-width" (a missing key shows as no interval)."""
    keys = (key if key.startswith("delta") else f"{key}_mean", f"{key}_ci95_low", f"{key}_ci95_high")
    return keys, lambda r: mean_pm(r.get(keys[0]), r.get(keys[1]), r.get(keys[2]), sign=sign)


def bracket(
    low: float | None, high: float | None, mean: float | None = None, sign: bool = True, digits: int = 2
) -> str:
    """An interval as "[low, high]", after its point estimate when given ("4.92 [4.80, 5.05]", for intervals
    that are not symmetric); the bare estimate without an interval, a dash without either."""
    fmt = signed if sign else num
    if low is None or high is None:
        return DASH if mean is None else fmt(mean, digits)
    interval = f"[{fmt(low, digits)}, {fmt(high, digits)}]"
    return interval if mean is None else f"{fmt(mean, digits)} {interval}"


def pvalue(p: float | None) -> str:
    """A p-value with enough digits to see small ones."""
    if p is None:
        return DASH
    return "0" if p == 0 else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table; the first column left-aligned, the rest right-aligned."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---"] + ["---:"] * (len(header) - 1)
    return "\n".join([line(header), line(align), *(line(r) for r in body)]) + "\n"


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters; ±, ×, Δ and − become math mode (pdflatex lacks them as text)."""
    out = "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)
    for char, latex in (("±", r"$\pm$"), ("×", r"$\times$"), ("Δ", r"$\Delta$"), ("−", "$-$"), (DASH, "---")):
        out = out.replace(char, latex)
    return out


def latex_tabular(header: Sequence[str], body: Sequence[Sequence[str]], rule_after: Sequence[int] = ()) -> str:
    """A booktabs tabular (needs \\usepackage{booktabs}); `rule_after` lists body rows followed by \\midrule."""
    lines = [
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
        r"\midrule",
    ]
    for i, row in enumerate(body):
        lines.append(" & ".join(latex_escape(c) for c in row) + r" \\")
        if i in rule_after and i != len(body) - 1:
            lines.append(r"\midrule")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
