"""sacreBLEU, chrF and the paper's tokenized, compound-split BLEU."""

from __future__ import annotations

import math

import pytest
import sacrebleu

from aiayn.eval.bleu import chrf, paper_bleu, paper_tokenize, sacre_bleu, split_compounds
from aiayn.eval.scoring import score_translations

HYPS = ["The cat sat on the mat.", "It's a rich-text format, isn't it?", "Hello world"]
REFS = ["The cat is sitting on the mat.", "It is a rich-text format, isn't it?", "Hello, world!"]


def test_sacre_bleu_and_chrf_equal_sacrebleu_itself():
    score, signature = sacre_bleu(HYPS, REFS)
    assert score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert "tok:13a" in signature and "nrefs:1" in signature
    assert chrf(HYPS, REFS) == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)


def test_tokenised_text_is_scored_the_same_without_sacrebleus_warning(caplog):
    # data.form=lc.norm.tok: both sides are the literature's tokenised text, on purpose
    hyps = ["ein mann fährt fahrrad .", "zwei hunde spielen im schnee ."] * 60
    refs = ["ein mann fährt ein fahrrad .", "zwei hunde spielen im schnee ."] * 60
    with caplog.at_level("WARNING", logger="sacrebleu"):
        quiet = sacre_bleu(hyps, refs, tokenized=True)
        scores = score_translations(hyps, refs, tgt_lang="de", bootstrap=20, tokenized=True)  # with its interval
    assert not [r for r in caplog.records if r.name == "sacrebleu"]
    assert scores["bleu"] == quiet[0] and scores["bleu_ci95"][0] <= quiet[0] <= scores["bleu_ci95"][1]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        loud = sacre_bleu(hyps, refs)
    assert [r for r in caplog.records if "detokenize" in r.getMessage()]  # the case the flag is for
    assert quiet == loud


def test_split_compounds_follows_the_tensor2tensor_perl_substitution():
    assert split_compounds("rich-text format") == "rich ##AT##-##AT## text format"
    assert split_compounds("a - b") == "a - b"  # a free-standing dash is no compound
    # Non-overlapping like perl's s///g: after "3-D" is rewritten the "D" is used up, so "-Brille" stays.
    assert split_compounds("3-D-Brille") == "3 ##AT##-##AT## D-Brille"


def test_paper_tokenize_is_moses_german_without_escaping_then_split():
    got = paper_tokenize(['Er sagte: "Das Kosten-Nutzen-Verhältnis & 1.000,50 Euro!"'], "de")
    assert got == ['Er sagte : " Das Kosten ##AT##-##AT## Nutzen ##AT##-##AT## Verhältnis & 1.000,50 Euro ! "']


def test_paper_bleu_counts_split_compound_tokens():
    # Nine tokens after splitting, one word differs at index 7: n-gram precisions 8/9, 6/8, 5/7, 4/6, BP = 1.
    hyp, ref = "the rich-text format is very good here", "the rich-text format is very nice here"
    expected = 100 * math.exp(sum(math.log(p) for p in (8 / 9, 6 / 8, 5 / 7, 4 / 6)) / 4)
    assert paper_bleu([hyp], [ref], "en") == pytest.approx(expected, abs=1e-9)
    # Unsplit, "rich-text" would be one token (7 tokens: 6/7, 4/6, 2/5, 2/4): a different number.
    unsplit = 100 * math.exp(sum(math.log(p) for p in (6 / 7, 4 / 6, 2 / 5, 2 / 4)) / 4)
    assert abs(expected - unsplit) > 1


def test_paper_bleu_credits_partly_right_compounds_that_sacrebleu_does_not():
    hyps = ["Wir machen heute eine Kosten-Analyse für das neue Projekt."]
    refs = ["Wir machen heute eine Kosten-Nutzen-Analyse für das neue Projekt."]
    # sacreBLEU's 13a keeps each compound as one (unmatched) token; split, "Kosten" and "Analyse" match.
    assert paper_bleu(hyps, refs, "de") > sacre_bleu(hyps, refs)[0] + 5


def test_score_translations_reports_every_field():
    scores = score_translations(HYPS, REFS, tgt_lang="en", bootstrap=50, seed=1)
    assert set(scores) >= {"bleu", "sacrebleu_signature", "bleu_paper", "chrf", "bleu_ci95", "n_sentences"}
    assert scores["n_sentences"] == 3 and len(scores["bleu_ci95"]) == 2
    assert scores["bleu"] == pytest.approx(sacre_bleu(HYPS, REFS)[0])
    assert score_translations(HYPS, REFS, tgt_lang="en", bootstrap=0)["bleu_ci95"] is None


@pytest.mark.parametrize("fn", [lambda h, r: sacre_bleu(h, r), lambda h, r: paper_bleu(h, r, "de"), chrf])
def test_unpaired_inputs_are_rejected(fn):
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        fn(HYPS[:2], REFS)


def test_lc_tok_bleu_is_multi_bleus_definition_on_a_case_computed_by_hand():
    """Raw 'Ein Mann, der läuft.' against 'Ein Mann, der schnell läuft.': lowercased, normalised and tokenised to 6
    and 7 tokens; precisions 6/6, 4/5, 2/4, 1/3; c < r, so BP = exp(1 - 7/6)."""
    from aiayn.eval.bleu import lc_tok, lc_tok_bleu

    hyp, ref = "Ein Mann, der läuft.", "Ein Mann, der schnell läuft."
    assert lc_tok([hyp, ref], "de") == ["ein mann , der läuft .", "ein mann , der schnell läuft ."]
    expected = 100 * math.exp(1 - 7 / 6) * math.exp(sum(math.log(p) for p in (1, 4 / 5, 2 / 4, 1 / 3)) / 4)
    score, signature = lc_tok_bleu([hyp], [ref], "de")
    assert score == pytest.approx(expected, abs=1e-9) and "tok:none" in signature and "smooth:none" in signature
    # Already in that form (a model trained on data.form=lc.norm.tok): scored as given, the same number.
    assert lc_tok_bleu(["ein mann , der läuft ."], ["ein mann , der schnell läuft ."], "de", tokenized=True)[0] == score
    # No smoothing, as multi-bleu.perl: an order without a match gives 0 (sacreBLEU's default 'exp' would not).
    assert lc_tok_bleu(["ein mann läuft"], ["ein mann läuft nicht"], "de")[0] == 0.0
    assert lc_tok(['Er sagt: "Hallo" & geht.'], "de") == ["er sagt : &quot; hallo &quot; &amp; geht ."]  # escaped


def test_lc_tok_gives_the_published_tokenised_test_set_line_for_line():
    from pathlib import Path

    from aiayn.eval.bleu import lc_tok

    shared = Path(__file__).resolve().parents[3] / "shared" / "data"
    if not (shared / "multi30k-tok").is_dir() or not (shared / "multi30k").is_dir():
        pytest.skip(f"no Multi30k files under {shared}")
    for lang in ("en", "de"):
        raw = (shared / "multi30k" / f"test_2016_flickr.{lang}").read_text(encoding="utf-8").splitlines()
        tok = (shared / "multi30k-tok" / f"test_2016_flickr.lc.norm.tok.{lang}").read_text(encoding="utf-8")
        assert lc_tok(raw, lang) == tok.splitlines()
