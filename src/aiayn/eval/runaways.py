"""Runaway hypotheses: outputs that ran to the search's length limit, or that repeat a run of words.

A model that has not learned when to stop emits a word, or a few, again and again until the search forces EOS at
its limit (input length + `decode.max_len_b`, section 6.1). One such line adds up to `max_len_b` wrong tokens to
the corpus's n-gram counts, so a handful of them can move a seed's BLEU by points while its perplexity, an average
over every token, barely moves. eval.json counts them per section, names their lines and gives the BLEU without
them, so that a table shows what moved a seed (docs/results.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aiayn.eval.bleu import check_parallel, sacre_bleu

REPEAT_TIMES = 4  # an n-gram of words said this many times back to back is a repetition
REPEAT_MAX_N = 4  # the longest repeated n-gram looked for
LINES_KEPT = 20  # the line numbers eval.json lists (the counts are complete)

_WORD = re.compile(r"\w+")


def repeats(line: str, times: int = REPEAT_TIMES, max_n: int = REPEAT_MAX_N) -> bool:
    """Whether `line` says some n-gram of words (1 <= n <= max_n; punctuation ignored) `times` times in a row:
    "pfohzwulte, pfohzwulte, pfohzwulte, pfohzwulte" does, "the dog saw the dog" does not."""
    if times < 2 or max_n < 1:
        raise ValueError(f"times must be >= 2 and max_n >= 1, got {times} and {max_n}")
    words = _WORD.findall(line)
    for n in range(1, max_n + 1):
        for start in range(len(words) - n * times + 1):
            gram = words[start : start + n]
            if all(words[start + k * n : start + (k + 1) * n] == gram for k in range(1, times)):
                return True
    return False


def at_length_limit(outputs: Sequence[Sequence[int]], limits: Sequence[int]) -> list[bool]:
    """Which outputs (token ids, no BOS or EOS) are as long as their search allowed: the search forced their EOS
    (aiayn.decode.step.force_eos), or, rarely, the model chose it there."""
    if len(outputs) != len(limits):
        raise ValueError(f"{len(outputs)} outputs but {len(limits)} limits")
    return [bool(out) and len(out) >= limit for out, limit in zip(outputs, limits)]


def runaway_summary(
    hyps: Sequence[str], refs: Sequence[str], limited: Sequence[bool], tokenized: bool = False
) -> dict[str, Any]:
    """eval.json's `runaways` of one section: how many hypotheses hit the length limit, how many repeat, how many
    either (the runaways), their 1-based line numbers (the first LINES_KEPT), and sacreBLEU without those lines
    (equal to the section's BLEU when there are none; `tokenized` as aiayn.eval.bleu.sacre_bleu's)."""
    check_parallel(hyps, refs)
    if len(limited) != len(hyps):
        raise ValueError(f"{len(hyps)} hypotheses but {len(limited)} length-limit flags")
    repeating = [repeats(h) for h in hyps]
    runaway = [a or b for a, b in zip(limited, repeating)]
    kept = [i for i, r in enumerate(runaway) if not r]
    lines = [i + 1 for i, r in enumerate(runaway) if r]
    bleu_without = sacre_bleu([hyps[i] for i in kept], [refs[i] for i in kept], tokenized)[0] if kept else None
    return {
        "at_length_limit": sum(limited),
        "repeating": sum(repeating),
        "count": len(lines),
        "lines": lines[:LINES_KEPT],
        "bleu_without": bleu_without,
    }
