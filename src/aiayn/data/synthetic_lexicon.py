"""Procedural lexicon of the synthetic English-like -> German-like language pair.

Content words are built from two disjoint syllable inventories with a fixed RNG, so the lexicon is the same on
every machine and ships no word lists. Closed-class words (articles, pronouns, prepositions, conjunctions) are
small hand-written paradigms because agreement lives there.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

LEXICON_SEED = 1706  # arXiv 1706.03762: fixed so every corpus seed shares one lexicon

GENDERS = ("m", "f", "n")
CASES = ("nom", "acc", "dat")

# German definite/indefinite articles by (gender or "pl", case); English has one form each ("the", "a").
DEF_ARTICLE = {
    ("m", "nom"): "der",
    ("m", "acc"): "den",
    ("m", "dat"): "dem",
    ("f", "nom"): "die",
    ("f", "acc"): "die",
    ("f", "dat"): "der",
    ("n", "nom"): "das",
    ("n", "acc"): "das",
    ("n", "dat"): "dem",
    ("pl", "nom"): "die",
    ("pl", "acc"): "die",
    ("pl", "dat"): "den",
}
INDEF_ARTICLE = {
    ("m", "nom"): "ein",
    ("m", "acc"): "einen",
    ("m", "dat"): "einem",
    ("f", "nom"): "eine",
    ("f", "acc"): "eine",
    ("f", "dat"): "einer",
    ("n", "nom"): "ein",
    ("n", "acc"): "ein",
    ("n", "dat"): "einem",
}
# Adjective endings: weak after the definite article, mixed after the indefinite one.
WEAK_ENDING = {
    ("m", "nom"): "e",
    ("f", "nom"): "e",
    ("n", "nom"): "e",
    ("m", "acc"): "en",
    ("f", "acc"): "e",
    ("n", "acc"): "e",
}
MIXED_ENDING = {
    ("m", "nom"): "er",
    ("f", "nom"): "e",
    ("n", "nom"): "es",
    ("m", "acc"): "en",
    ("f", "acc"): "e",
    ("n", "acc"): "es",
}
REL_PRONOUN = {"m": "der", "f": "die", "n": "das", "pl": "die"}

# Subject pronouns: (English, German, person/number key used for verb endings).
PRONOUNS = (
    ("I", "ich", "1sg"),
    ("you", "du", "2sg"),
    ("he", "er", "3sg"),
    ("she", "sie", "3sg"),
    ("it", "es", "3sg"),
    ("we", "wir", "1pl"),
    ("they", "sie", "3pl"),
)
PRESENT_ENDING = {"1sg": "e", "2sg": "st", "3sg": "t", "1pl": "en", "2pl": "t", "3pl": "en"}
PAST_ENDING = {"1sg": "te", "2sg": "test", "3sg": "te", "1pl": "ten", "2pl": "tet", "3pl": "ten"}
HABEN = {"1sg": "habe", "2sg": "hast", "3sg": "hat", "1pl": "haben", "2pl": "habt", "3pl": "haben"}
WERDEN = {"1sg": "werde", "2sg": "wirst", "3sg": "wird", "1pl": "werden", "2pl": "werdet", "3pl": "werden"}

# Prepositions: English, German, case governed.
PREPOSITIONS = (
    ("with", "mit", "dat"),
    ("from", "von", "dat"),
    ("in", "in", "dat"),
    ("after", "nach", "dat"),
    ("for", "für", "acc"),
    ("without", "ohne", "acc"),
    ("through", "durch", "acc"),
)
# Subordinating conjunctions (English, German); "that"/"dass" only follows a verb of saying.
SUBORDINATORS = (("because", "weil"), ("although", "obwohl"), ("while", "während"), ("if", "wenn"))
# Separable particles (English particle, German prefix).
PARTICLES = (("up", "auf"), ("out", "aus"), ("along", "mit"), ("on", "an"), ("away", "weg"), ("back", "zurück"))

_EN = dict(
    onset=(
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "j",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "w",
        "y",
        "br",
        "cl",
        "cr",
        "dr",
        "fl",
        "gl",
        "gr",
        "pl",
        "pr",
        "sh",
        "sl",
        "sm",
        "sn",
        "st",
        "th",
        "tr",
        "wh",
    ),
    vowel=("a", "e", "i", "o", "u", "ea", "oo", "ai", "oa", "y"),
    coda=(
        "b",
        "ck",
        "d",
        "ff",
        "g",
        "ll",
        "m",
        "mp",
        "n",
        "nd",
        "nk",
        "p",
        "rk",
        "rm",
        "rn",
        "sk",
        "t",
        "th",
        "lt",
        "ng",
    ),
)
_DE = dict(
    onset=(
        "b",
        "d",
        "f",
        "g",
        "h",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "w",
        "z",
        "sch",
        "sp",
        "pf",
        "kr",
        "gr",
        "br",
        "fr",
        "bl",
        "kl",
        "schw",
        "schl",
        "zw",
        "kn",
        "tr",
        "dr",
        "str",
    ),
    vowel=("a", "e", "i", "o", "u", "ä", "ö", "ü", "ei", "au", "ie", "eu", "ah", "oh"),
    coda=(
        "b",
        "ch",
        "ck",
        "f",
        "g",
        "k",
        "l",
        "ll",
        "m",
        "mm",
        "n",
        "ng",
        "nk",
        "p",
        "r",
        "rb",
        "rg",
        "rk",
        "rm",
        "rn",
        "lk",
        "lm",
        "pf",
        "tz",
        "ß",
        "cht",
        "ft",
    ),
)
# German verb stems must not end in t/d/s so that -t/-st endings attach without an epenthetic e.
_DE_VERB_CODA = tuple(c for c in _DE["coda"] if c[-1] not in "tdsß")
_EN_VERB_CODA = tuple(c for c in _EN["coda"] if c[-1] not in "sdt")


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    de: str  # capitalised singular
    de_pl: str
    gender: str


@dataclass(frozen=True)
class Verb:
    en: str  # stem: "grab"; 3sg "grabs", past and participle "grabbed"-like "grabed" (regular)
    de: str  # stem: infinitive is de + "en"
    transitive: bool
    particle: tuple[str, str] | None = None  # (English particle, German separable prefix)
    says: bool = False  # takes a "that"/"dass" clause


@dataclass(frozen=True)
class Lexicon:
    nouns: tuple[Noun, ...]
    adjectives: tuple[tuple[str, str], ...]  # (English, German stem)
    verbs: tuple[Verb, ...]
    adverbs: tuple[tuple[str, str], ...]  # sentence adverbs that can be fronted

    def noun_by_de(self) -> dict[str, Noun]:
        """Map German singular and plural forms to their noun (for tests re-deriving agreement)."""
        out = {n.de: n for n in self.nouns}
        out.update({n.de_pl: n for n in self.nouns})
        return out


def _word(rng: random.Random, inv: dict, n_syll: int, coda: tuple[str, ...] | None = None) -> str:
    parts = []
    for i in range(n_syll):
        last = i == n_syll - 1
        parts.append(rng.choice(inv["onset"]) + rng.choice(inv["vowel"]))
        if last or rng.random() < 0.3:
            parts.append(rng.choice(coda if (last and coda) else inv["coda"]))
    return "".join(parts)


# Substrings no generated stem may contain: syllables drawn at random spell profanities and slurs of English and
# German now and then (the default corpus once had "fucken" among its eight verbs), and the corpus is read in
# tables, figures and logs. A stem that contains one is drawn again.
BLOCKED = (
    "anal", "anus", "arsch", "bitch", "cock", "cum", "cunt", "dick", "fag", "fick", "fotz", "fuck", "hitler",
    "hure", "jew", "kike", "nazi", "nigg", "nigr", "penis", "piss", "porn", "rape", "schlampe", "scheis", "sex",
    "shit", "slut", "spic", "tit", "twat", "vagina", "wank", "whore", "wichs",
)  # fmt: skip


_FORMS = ("", "e", "en", "er", "n", "s", "es", "t", "te", "ten", "st", "test", "ed", "ing")  # endings inflection adds


def blocked(stem: str) -> bool:
    """Whether the stem, or a form inflection makes of it (an ending, the participle's ge-), spells a BLOCKED word."""
    low = stem.lower()
    return any(b in f"{prefix}{low}{ending}" for b in BLOCKED for prefix in ("", "ge") for ending in _FORMS)


def _unique(rng: random.Random, inv: dict, n: int, taken: set[str], coda=None, syll=(1, 2, 2, 3)) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        w = _word(rng, inv, rng.choice(syll), coda)
        if w not in taken and not blocked(w):
            taken.add(w)
            out.append(w)
    return out


def _de_plural(stem: str, gender: str) -> str:
    if gender == "f":
        return stem + ("n" if stem.endswith("e") else "en")
    return stem + ("er" if gender == "n" else "e")


def _en_plural(stem: str) -> str:
    return stem + ("es" if stem.endswith(("sh", "ch", "s", "x")) else "s")


def build_lexicon(n_nouns: int = 1800, n_adjectives: int = 500, n_verbs: int = 700, n_adverbs: int = 60) -> Lexicon:
    """Deterministically build the lexicon (a few thousand lemmas, more word forms after inflection)."""
    rng = random.Random(LEXICON_SEED)
    closed = {"the", "a", "and", "that", "who", "which", "will", "has", "have", "does", "do", "did"}
    closed |= {w for p in PRONOUNS for w in p[:2]} | {w for p in PREPOSITIONS for w in p[:2]}
    closed |= {w for s in SUBORDINATORS for w in s} | {w for p in PARTICLES for w in p}
    # One shared "taken" set: no English-like form equals a German-like one, so the two sides never share a word.
    taken = closed | set(DEF_ARTICLE.values()) | set(INDEF_ARTICLE.values()) | {"und", "dass"}
    en_n = _unique(rng, _EN, n_nouns, taken)
    de_n = _unique(rng, _DE, n_nouns, taken)
    nouns = tuple(
        Noun(e, _en_plural(e), d.capitalize(), _de_plural(d, g).capitalize(), g)
        for e, d, g in zip(en_n, de_n, (rng.choice(GENDERS) for _ in en_n))
    )
    adjectives = tuple(
        zip(
            _unique(rng, _EN, n_adjectives, taken, syll=(1, 2, 2)),
            _unique(rng, _DE, n_adjectives, taken, syll=(1, 2, 2)),
        )
    )
    en_v = _unique(rng, _EN, n_verbs, taken, coda=_EN_VERB_CODA, syll=(1, 1, 2))
    de_v = _unique(rng, _DE, n_verbs, taken, coda=_DE_VERB_CODA, syll=(1, 1, 2))
    n_says = min(25, max(1, n_verbs // 5))  # verbs that take a clause ("say", "think")
    verbs = []
    for i, (e, d) in enumerate(zip(en_v, de_v)):
        particle = rng.choice(PARTICLES) if rng.random() < 0.2 else None
        verbs.append(Verb(e, d, transitive=rng.random() < 0.7, particle=particle, says=i < n_says))
    # The grammar draws from transitive and intransitive verbs alike: a small lexicon needs one of each.
    plain = [i for i, v in enumerate(verbs) if not v.says]
    for want, i in ((False, plain[-1]), (True, plain[0])):
        if all(verbs[j].transitive != want for j in plain):
            verbs[i] = dataclasses.replace(verbs[i], transitive=want)
    adverbs = tuple(
        zip(_unique(rng, _EN, n_adverbs, taken, syll=(2, 3)), _unique(rng, _DE, n_adverbs, taken, syll=(2, 3)))
    )
    return Lexicon(nouns, adjectives, tuple(verbs), adverbs)


def scaled_lexicon(scale: float = 1.0) -> Lexicon:
    """The lexicon with every open word class resized by `scale` (at least 10 nouns, 5 adjectives, 8 verbs)."""
    if scale <= 0:
        raise ValueError(f"data.lexicon_scale must be > 0, got {scale}")
    return build_lexicon(
        n_nouns=max(10, round(1800 * scale)),
        n_adjectives=max(5, round(500 * scale)),
        n_verbs=max(8, round(700 * scale)),
        n_adverbs=max(3, round(60 * scale)),
    )
