"""Translation scores: sacreBLEU, the paper's tokenized compound-split BLEU, and chrF (section 6.1, Table 2)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacremoses import MosesTokenizer

# tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g' (non-overlapping, as in perl).
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")


def check_parallel(hyps: Sequence[str], refs: Sequence[str]) -> None:
    """Hypotheses and references must pair up line by line."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not refs:
        raise ValueError("no sentences to score")


def sacre_bleu(hyps: Sequence[str], refs: Sequence[str]) -> tuple[float, str]:
    """sacreBLEU of detokenized hypotheses against raw references, with its signature string."""
    check_parallel(hyps, refs)
    metric = BLEU()
    score = metric.corpus_score(list(hyps), [list(refs)])
    return score.score, str(metric.get_signature())


def split_compounds(line: str) -> str:
    """Hyphenated compounds as separate tokens, 'rich-text' -> 'rich ##AT##-##AT## text' (tensor2tensor)."""
    return _COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", line)


def paper_tokenize(lines: Sequence[str], lang: str) -> list[str]:
    """Moses tokenization (language-aware, no escaping) then compound splitting, as the paper's BLEU was computed."""
    # Departure: see docs/departures.md#eval-paper-bleu-tokenizer
    tokenizer = MosesTokenizer(lang=lang)
    return [split_compounds(tokenizer.tokenize(line, escape=False, return_str=True)) for line in lines]


def paper_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str) -> float:
    """The paper's metric (Table 2): BLEU over Moses tokens with split compounds, like multi-bleu.perl.

    Reads higher than sacreBLEU (different tokenization); reported beside it, never instead of it.
    """
    check_parallel(hyps, refs)
    metric = BLEU(tokenize="none", force=True)
    return metric.corpus_score(paper_tokenize(hyps, lang), [paper_tokenize(refs, lang)]).score


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """chrF (sacreBLEU's default character n-gram F-score) of detokenized hypotheses against raw references."""
    check_parallel(hyps, refs)
    return CHRF().corpus_score(list(hyps), [list(refs)]).score
