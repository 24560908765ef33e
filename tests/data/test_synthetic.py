"""Synthetic corpus: determinism, sizes, lengths, and that reordering, agreement and compounds really occur."""

from __future__ import annotations

import collections

import pytest

from aiayn.data import synthetic, synthetic_lexicon

# Our own copy of the German paradigms, so agreement is checked against an independent table.
ARTICLES = {
    True: {
        "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
        "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
        "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
    },
    False: {
        "nom": {"m": "ein", "f": "eine", "n": "ein"},
        "acc": {"m": "einen", "f": "eine", "n": "ein"},
        "dat": {"m": "einem", "f": "einer", "n": "einem"},
    },
}
ADJ_ENDINGS = {
    True: {
        "nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
        "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
        "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"},
    },
    False: {
        "nom": {"m": "er", "f": "e", "n": "es"},
        "acc": {"m": "en", "f": "e", "n": "es"},
        "dat": {"m": "en", "f": "en", "n": "en"},
    },
}
AUX = {"habe", "hast", "hat", "haben", "habt", "werde", "wirst", "wird", "werden", "werdet"}


@pytest.fixture(scope="module")
def pairs():
    return synthetic.generate(1500, seed=3, with_meta=True)


@pytest.fixture(scope="module")
def lexicon():
    return synthetic_lexicon.build_lexicon()


def _surface_words(sentence: str) -> list[str]:
    words = [w.rstrip(",.?") for w in sentence.split()]
    return [words[0].lower()] + words[1:]


def _contains(words: list[str], part: list[str]) -> bool:
    part = [part[0].lower()] + part[1:] if part else part
    lowered = [words[0]] + words[1:]
    n = len(part)
    return any(
        lowered[i : i + n] == part or [lowered[i].lower()] + lowered[i + 1 : i + n] == part
        for i in range(len(lowered) - n + 1)
    )


def test_same_seed_gives_byte_identical_files(tmp_path):
    sizes = {"train": 300, "valid": 30, "test": 30}
    synthetic.write_corpus(tmp_path / "a", sizes, seed=7)
    synthetic.write_corpus(tmp_path / "b", sizes, seed=7)
    synthetic.write_corpus(tmp_path / "c", sizes, seed=8)
    for name in ("train.src", "train.tgt", "valid.src", "test.tgt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "train.src").read_bytes() != (tmp_path / "c" / "train.src").read_bytes()


def test_sizes_honoured_and_splits_disjoint(tmp_path):
    sizes = {"train": 3000, "valid": 300, "test": 300}
    synthetic.write_corpus(tmp_path, sizes, seed=0, src_ext="en", tgt_ext="de")
    sources = {}
    for split, n in sizes.items():
        src = (tmp_path / f"{split}.en").read_text(encoding="utf-8").split("\n")
        tgt = (tmp_path / f"{split}.de").read_text(encoding="utf-8").split("\n")
        assert src[-1] == "" and tgt[-1] == ""  # every line ends with "\n"
        assert len(src) - 1 == n and len(tgt) - 1 == n
        sources[split] = set(src[:-1])
    assert not sources["train"] & sources["valid"]
    assert not sources["train"] & sources["test"]
    assert not sources["valid"] & sources["test"]


def test_lengths_within_bounds_and_spread():
    lens = [len(s.split()) for pair in synthetic.generate(3000, seed=1) for s in pair]
    assert min(lens) >= 4 and max(lens) <= 40
    assert sum(n <= 8 for n in lens) > 100 and sum(n >= 25 for n in lens) > 100


def test_sentences_capitalised_and_punctuated(pairs):
    for en, de, _ in pairs:
        assert en[0].isupper() and de[0].isupper()
        assert en[-1] in ".?" and de[-1] == en[-1]


def test_verb_final_subordinate_and_verb_second_inversion(pairs, lexicon):
    stems = {v.de for v in lexicon.verbs}
    kinds = collections.Counter()
    for en, de, meta in pairs:
        de_words, en_words = _surface_words(de), _surface_words(en)
        for c in meta["clauses"]:
            assert _contains(de_words, c["de"]) and _contains(en_words, c["en"])
            assert c["finite"] in AUX or any(s in c["finite"] for s in stems)
            k, f, f_en = len(c["subj_en"]), c["front_de"], c["front_en"]
            if c["kind"] in ("sub", "rel"):  # German: finite verb last; English: verb right after the subject
                assert c["de"][-1] == c["finite"]
                assert c["en"][:k] == c["subj_en"]
                assert c["en"][k].startswith(c["verb_en"]) or c["en"][k] in ("has", "have", "will")
                kinds[c["kind"]] += len(c["de"]) > len(c["subj_de"]) + 1  # something separates subject and verb
            elif c["kind"] == "v2":  # German: fronted phrase, finite verb, subject; English: subject first
                assert c["de"][f] == c["finite"]
                assert c["de"][f + 1 : f + 1 + len(c["subj_de"])] == c["subj_de"]
                assert c["en"][f_en : f_en + k] == c["subj_en"]
                kinds["v2"] += 1
    assert kinds["sub"] > 100 and kinds["rel"] > 20 and kinds["v2"] > 100


def test_article_adjective_noun_agreement(pairs, lexicon):
    gender = {n.de: n.gender for n in lexicon.nouns}
    adjectives = {a[1] for a in lexicon.adjectives}
    cases = collections.Counter()
    for _en, de, meta in pairs:
        words = _surface_words(de)
        for np_ in meta["nps"]:
            tokens = [t for t in np_["de"] if t != ","]
            assert _contains(words, tokens)
            g = "pl" if np_["plural"] else gender[np_["noun"]]
            table_key = np_["definite"]
            assert tokens[0] == ARTICLES[table_key][np_["case"]][g]
            for adj in tokens[1:-1]:
                ending = ADJ_ENDINGS[table_key][np_["case"]][g]
                assert adj.endswith(ending) and adj[: -len(ending)] in adjectives
            assert np_["en"][0] in ("the", "a")  # English has one form per article
            cases[(np_["case"], g)] += 1
    assert all(cases[(c, g)] > 5 for c in ("nom", "acc", "dat") for g in ("m", "f", "n", "pl"))


def test_compounds_concatenate_and_take_head_gender(pairs, lexicon):
    nouns = {n.de for n in lexicon.nouns}
    found = 0
    for _en, de, meta in pairs:
        for mod, head, surface in meta["compounds"]:
            assert surface.startswith(mod + head.lower()[:3]) and surface not in nouns
            assert surface in _surface_words(de)
            found += 1
    assert found > 100


def test_vocabulary_in_the_thousands_and_sides_disjoint(lexicon):
    n_lemmas = len(lexicon.nouns) + len(lexicon.adjectives) + len(lexicon.verbs) + len(lexicon.adverbs)
    assert 2000 <= n_lemmas <= 10000
    pairs = synthetic.generate(5000, seed=2)
    en_types = {w.rstrip(",.?").lower() for en, _ in pairs for w in en.split()}
    de_types = {w.rstrip(",.?").lower() for _, de in pairs for w in de.split()}
    assert len(en_types) > 2000 and len(de_types) > 3000
    shared = en_types & de_types
    assert shared <= {"in"}, shared  # only the preposition both languages spell alike


@pytest.mark.parametrize("scale", [0.001, 0.005, 0.02])
def test_a_small_lexicon_still_has_every_kind_of_verb(scale):
    """The tiny scale's lexicon (0.005) draws from transitive, intransitive and clause-taking verbs alike."""
    verbs = synthetic_lexicon.scaled_lexicon(scale).verbs
    assert any(v.says for v in verbs)
    plain = [v for v in verbs if not v.says]
    assert any(v.transitive for v in plain) and any(not v.transitive for v in plain)
    assert len(synthetic.generate(300, seed=5, lexicon_scale=scale)) == 300


def test_max_words_bounds_both_sides(tmp_path):
    pairs = synthetic.generate(500, seed=3, max_words=12)
    assert max(max(len(s.split()), len(t.split())) for s, t in pairs) <= 12
    assert min(len(s.split()) for s, _ in pairs) >= synthetic.MIN_WORDS
    with pytest.raises(ValueError, match="max_words=3"):
        synthetic.generate(1, seed=3, max_words=3)


def test_the_default_lexicon_is_unchanged_by_the_small_lexicon_rules():
    """lexicon_scale 0.2 (the data of earlier runs) gives the same words as before the 8-verb minimum."""
    lexicon = synthetic_lexicon.scaled_lexicon(0.2)
    assert sum(v.says for v in lexicon.verbs) == 25 and len(lexicon.verbs) == 140


@pytest.mark.parametrize("scale", [0.005, 1.0])
def test_no_word_of_the_corpus_spells_a_blocked_word(scale):
    """Random syllables once spelled "fucken" among the default corpus's eight verbs, and a compound "arsch" across
    its seam; no sentence of a generated corpus (every inflection, compound and particle) contains a blocked
    substring, at the default's lexicon and the full one."""
    pairs = synthetic.generate(3000, seed=1234, lexicon_scale=scale)
    text = " ".join(f"{s} {t}" for s, t in pairs).lower()
    assert [b for b in synthetic_lexicon.BLOCKED if b in text] == []
    assert synthetic_lexicon.blocked("Fuck") and synthetic_lexicon.blocked("drap")  # "drapen": an inflection
