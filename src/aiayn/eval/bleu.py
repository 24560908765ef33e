"""Translation scores: sacreBLEU, the paper's tokenized compound-split BLEU, and chrF (section 6.1, Table 2)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacremoses import MosesPunctNormalizer, MosesTokenizer

# tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g' (non-overlapping, as in perl).
_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")


def check_parallel(hyps: Sequence[str], refs: Sequence[str]) -> None:
    """Hypotheses and references must pair up line by line."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: they must pair up line by line")
    if not refs:
        raise ValueError("no sentences to score")


def sacre_bleu(hyps: Sequence[str], refs: Sequence[str], tokenized: bool = False) -> tuple[float, str]:
    """sacreBLEU of detokenized hypotheses against raw references, with its signature string. `tokenized`: both are
    the literature's tokenised text (data.form=lc.norm.tok), scored as they are without sacreBLEU's warning that they
    look tokenised (the signature is the same)."""
    check_parallel(hyps, refs)
    metric = BLEU(force=tokenized)
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


def lc_tok(lines: Sequence[str], lang: str) -> list[str]:
    """Lines as the Multi30k literature scores them: the pipeline of its data/task1/tok files
    (scripts/task1-tokenize.sh: Moses lowercase.perl, normalize-punctuation.perl -l LANG, tokenizer.perl -l LANG,
    which escapes & " ' < > | [ ]), in sacremoses' ports. On test_2016_flickr and val.en it gives the published files
    line for line."""
    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [
        tokenizer.tokenize(normalizer.normalize(line.lower()), escape=True, return_str=True).strip() for line in lines
    ]


LC_TOK_BLEU = BLEU(tokenize="none", smooth_method="none", force=True)  # multi-bleu.perl: tokens as given, no smoothing


def lc_tok_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str, tokenized: bool = False) -> tuple[float, str]:
    """The Multi30k literature's BLEU, multi-bleu.perl's definition: corpus BLEU over whitespace tokens of lowercased,
    punctuation-normalised, Moses-tokenised text (`lc_tok`), n-grams up to 4, uniform weights, the brevity penalty
    exp(1 - r/c) when c < r, no smoothing (0 when some order has no match); with its sacreBLEU signature (tok:none).
    `tokenized`: the lines are already in that form (a model trained on data.form=lc.norm.tok), scored as they are.
    """
    check_parallel(hyps, refs)
    if not tokenized:
        hyps, refs = lc_tok(hyps, lang), lc_tok(refs, lang)
    score = LC_TOK_BLEU.corpus_score(list(hyps), [list(refs)])
    return score.score, str(LC_TOK_BLEU.get_signature())


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """chrF (sacreBLEU's default character n-gram F-score) of detokenized hypotheses against raw references."""
    check_parallel(hyps, refs)
    return CHRF().corpus_score(list(hyps), [list(refs)]).score
