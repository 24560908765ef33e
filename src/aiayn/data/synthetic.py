"""Deterministic synthetic English-like -> German-like parallel corpus (a stand-in for WMT14 EN-DE, section 5.1).

Grammar of the pair: both sides are SVO in plain main clauses, but the German-like side is verb-second (a fronted
adverb, prepositional phrase or subordinate clause pushes the finite verb before the subject), verb-final in
subordinate and relative clauses ("..., weil der Hund den Ball sieht"), and puts participles, infinitives and
separable particles at the clause end ("hat ... gesehen", "wird ... sehen", "sieht ... an"). English has one article
form ("the"/"a"); German articles and adjective endings agree with the noun in gender (m/f/n), number and case
(nominative subject, accusative object, dative or accusative after prepositions). German nouns are capitalised and
form compounds by concatenation ("Haus"+"Tür" -> "Haustür", English "house door"); verbs inflect for person, number
and tense. Content words come from `synthetic_lexicon`; sentences are 4 to 40 words long.
"""

from __future__ import annotations

import bisect
import itertools
import random
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.data import synthetic_lexicon as lx
from aiayn.io import atomic_path

# Departure: see docs/departures.md#synthetic-corpus (a generated stand-in for WMT14 at small scales)
MIN_WORDS, MAX_WORDS = 4, 40
_PUNCT = {",", ".", "?"}


class _Zipf:
    """Zipf-distributed choice (word frequencies in real text are roughly Zipfian)."""

    def __init__(self, items, rng: random.Random):
        self.items = items
        self.cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(items))))
        self.rng = rng

    def __call__(self):
        return self.items[bisect.bisect_left(self.cum, self.rng.random() * self.cum[-1])]


class _Grammar:
    """One sentence generator: draws clauses and realises both word orders from the same choices."""

    def __init__(self, lexicon: lx.Lexicon, rng: random.Random):
        self.rng = rng
        self.noun = _Zipf(lexicon.nouns, rng)
        self.adj = _Zipf(lexicon.adjectives, rng)
        self.tverb = _Zipf([v for v in lexicon.verbs if v.transitive and not v.says], rng)
        self.iverb = _Zipf([v for v in lexicon.verbs if not v.transitive and not v.says], rng)
        self.sverb = _Zipf([v for v in lexicon.verbs if v.says], rng)
        self.adverb = _Zipf(lexicon.adverbs, rng)

    def np(self, case: str, meta: dict, rel_depth: int = 0) -> tuple[list[str], list[str], str]:
        """Noun phrase: (English words, German words, person key); German agrees in gender/number/case."""
        r, noun = self.rng, self.noun()
        plural, definite = r.random() < 0.25, True
        if not plural:
            definite = r.random() < 0.7
        adjs = [self.adj() for _ in range(r.choice((0, 0, 0, 1, 1, 2)))]
        mod = self.noun() if r.random() < 0.12 else None
        if mod is not None and lx.blocked(mod.de + (noun.de_pl if plural else noun.de).lower()):
            mod = None  # a compound that would spell a blocked word across its seam stays a plain noun
        gkey = "pl" if plural else noun.gender
        if definite:
            art_en, art_de = "the", lx.DEF_ARTICLE[(gkey, case)]
            ending = "en" if plural or case == "dat" else lx.WEAK_ENDING[(gkey, case)]
        else:
            art_en, art_de = "a", lx.INDEF_ARTICLE[(gkey, case)]
            ending = "en" if case == "dat" else lx.MIXED_ENDING[(gkey, case)]
        head_de = noun.de_pl if plural else noun.de
        if plural and case == "dat" and not head_de.endswith(("n", "s")):
            head_de += "n"
        head_en = noun.en_pl if plural else noun.en
        if mod is not None:  # German compounds concatenate; the head decides gender
            head_de = mod.de + head_de.lower()
            head_en = f"{mod.en} {head_en}"
        de = [art_de] + [a[1] + ending for a in adjs] + [head_de]
        en = [art_en] + [a[0] for a in adjs] + head_en.split()
        meta["nps"].append(
            dict(
                de=list(de),
                en=list(en),
                noun=noun.de,
                mod=mod.de if mod else None,
                case=case,
                plural=plural,
                definite=definite,
            )
        )
        person = "3pl" if plural else "3sg"
        if rel_depth > 0 and r.random() < 0.2:  # subject relative clause, verb-final in German
            rel_en, rel_de = self.clause(meta, "rel", rel_depth - 1, subject=(["that"], [lx.REL_PRONOUN[gkey]], person))
            en, de = en + rel_en, de + [","] + rel_de + [","]
        if mod is not None:
            meta["compounds"].append((mod.de, noun.de, head_de))
        return en, de, person

    def subject(self, meta: dict, depth: int) -> tuple[list[str], list[str], str]:
        if self.rng.random() < 0.2:
            en, de, person = self.rng.choice(lx.PRONOUNS)
            return [en], [de], person
        return self.np("nom", meta, rel_depth=depth)

    def pp(self, meta: dict) -> tuple[list[str], list[str]]:
        en_p, de_p, case = self.rng.choice(lx.PREPOSITIONS)
        en, de, _ = self.np(case, meta)
        return [en_p] + en, [de_p] + de

    def verb_forms(self, verb: lx.Verb, tense: str, person: str, final: bool) -> tuple[list[str], list[str]]:
        """German (finite, clause-final words); with `final` (verb-final clause) the finite verb goes last."""
        prefix = verb.particle[1] if verb.particle else ""
        if tense in ("present", "past"):
            table = lx.PRESENT_ENDING if tense == "present" else lx.PAST_ENDING
            finite = verb.de + table[person]
            if final:
                return [prefix + finite], []
            return [finite], [prefix] if prefix else []
        aux = (lx.HABEN if tense == "perfect" else lx.WERDEN)[person]
        nonfinite = prefix + ("ge" + verb.de + "t" if tense == "perfect" else verb.de + "en")
        return [aux], [nonfinite]  # verb-final order puts the auxiliary after the participle/infinitive

    def en_verb(self, verb: lx.Verb, tense: str, person: str, question: bool) -> tuple[list[str], list[str]]:
        """English (auxiliary or verb before the subject in questions, verb group after it)."""
        third = person == "3sg"
        if tense == "present":
            group = ["does" if third else "do", verb.en] if question else [verb.en + ("s" if third else "")]
        elif tense == "past":
            group = ["did", verb.en] if question else [verb.en + "ed"]
        elif tense == "perfect":
            group = ["has" if third else "have", verb.en + "ed"]
        else:
            group = ["will", verb.en]
        if verb.particle:
            group.append(verb.particle[0])
        return (group[:1], group[1:]) if question else ([], group)

    def clause(self, meta: dict, kind: str, depth: int, subject=None, front=None) -> tuple[list[str], list[str]]:
        """One clause; kind in main | v2 | sub | rel | question | say. Returns (English, German) words."""
        r = self.rng
        s_en, s_de, person = subject if subject else self.subject(meta, depth)
        tense = r.choice(("present", "present", "past", "perfect", "future"))
        verb = self.sverb() if kind == "say" else (self.tverb() if r.random() < 0.75 else self.iverb())
        obj_en: list[str] = []
        obj_de: list[str] = []
        if verb.transitive and kind != "say":
            obj_en, obj_de, _ = self.np("acc", meta)
        for _ in range(r.choice((0, 0, 1, 1, 2)) if kind != "say" else 0):
            p_en, p_de = self.pp(meta)
            obj_en, obj_de = obj_en + p_en, obj_de + p_de
        final = kind in ("sub", "rel")
        finite, rest = self.verb_forms(verb, tense, person, final)
        pre_en, group_en = self.en_verb(verb, tense, person, kind == "question")
        f_en, f_de = front if front else ([], [])
        en = f_en + pre_en + s_en + group_en + obj_en
        if final:
            de = s_de + obj_de + rest + finite
        elif kind in ("v2", "question"):
            de = f_de + finite + s_de + obj_de + rest
        else:
            de = s_de + finite + obj_de + rest
        meta["clauses"].append(
            dict(
                kind=kind,
                de=_words(de),
                en=_words(en),
                finite=finite[0],
                front_de=len(_words(f_de)),
                front_en=len(_words(f_en)),
                subj_de=_words(s_de),
                subj_en=_words(s_en),
                verb_en=verb.en,
            )
        )
        return en, de

    def sentence(self, meta: dict) -> tuple[list[str], list[str]]:
        r, kind = self.rng, self.rng.random()
        if kind < 0.25:
            en, de = self.clause(meta, "main", 1)
        elif kind < 0.42:  # fronted adverb or prepositional phrase: German inverts (V2)
            front = ([w] for w in self.adverb()) if r.random() < 0.5 else self.pp(meta)
            en, de = self.clause(meta, "v2", 1, front=tuple(front))
        elif kind < 0.57:
            c_en, c_de = r.choice(lx.SUBORDINATORS)
            m_en, m_de = self.clause(meta, "main", 1)
            s_en, s_de = self.clause(meta, "sub", 1)
            en, de = m_en + [",", c_en] + s_en, m_de + [",", c_de] + s_de
        elif kind < 0.66:  # fronted subordinate clause occupies the first position: verb comes next
            c_en, c_de = r.choice(lx.SUBORDINATORS)
            s_en, s_de = self.clause(meta, "sub", 0)
            en, de = self.clause(meta, "v2", 0, front=([c_en] + s_en + [","], [c_de] + s_de + [","]))
        elif kind < 0.76:
            m_en, m_de = self.clause(meta, "say", 1)
            s_en, s_de = self.clause(meta, "sub", 1)
            en, de = m_en + ["that"] + s_en, m_de + [",", "dass"] + s_de
        elif kind < 0.9:
            a_en, a_de = self.clause(meta, "main", 1)
            b_en, b_de = self.clause(meta, "main", 0)
            en, de = a_en + ["and"] + b_en, a_de + ["und"] + b_de
        else:
            en, de = self.clause(meta, "question", 1)
            return en + ["?"], de + ["?"]
        return en + ["."], de + ["."]


def _words(tokens: list[str]) -> list[str]:
    return [t for t in tokens if t not in _PUNCT]


def _join(tokens: list[str]) -> str:
    """Attach punctuation to the previous word; drop a comma right before other punctuation."""
    out: list[str] = []
    for i, t in enumerate(tokens):
        if t == "," and (i + 1 == len(tokens) or tokens[i + 1] in _PUNCT or not out):
            continue
        if t in _PUNCT and out:
            out[-1] += t
        else:
            out.append(t)
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out)


def iter_pairs(seed: int, with_meta: bool = False, lexicon_scale: float = 1.0, max_words: int = MAX_WORDS) -> Iterator:
    """Endless stream of (English, German) pairs (with a metadata dict when `with_meta`), 4 to `max_words` words.

    `lexicon_scale` shrinks (or grows) the open-class lexicon; 1.0 is about 3000 lemmas.
    """
    if max_words < MIN_WORDS:
        raise ValueError(f"data.max_words={max_words} must be at least {MIN_WORDS}")
    rng = random.Random(seed)
    grammar = _Grammar(lx.scaled_lexicon(lexicon_scale), rng)
    while True:
        meta: dict[str, list[Any]] = dict(nps=[], clauses=[], compounds=[])
        en, de = grammar.sentence(meta)
        en_s, de_s = _join(en), _join(de)
        if MIN_WORDS <= len(en_s.split()) <= max_words and MIN_WORDS <= len(de_s.split()) <= max_words:
            yield (en_s, de_s, meta) if with_meta else (en_s, de_s)


def generate(
    n_pairs: int, seed: int, with_meta: bool = False, lexicon_scale: float = 1.0, max_words: int = MAX_WORDS
) -> list:
    """`n_pairs` deterministic pairs for `seed`: (src, tgt) tuples, or (src, tgt, meta) with `with_meta`."""
    return list(itertools.islice(iter_pairs(seed, with_meta, lexicon_scale, max_words), n_pairs))


def split_seed(seed: int, split: str) -> int:
    """Independent per-split stream: mix the split name into the seed (crc32 is stable across runs)."""
    return seed * 1_000_003 + zlib.crc32(split.encode())


def _write_lines(path: Path, lines: list[str]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)


def write_corpus(
    out_dir,
    sizes: dict[str, int],
    seed: int,
    src_ext: str = "src",
    tgt_ext: str = "tgt",
    lexicon_scale: float = 1.0,
    max_words: int = MAX_WORDS,
) -> dict:
    """Write `{split}.{src_ext,tgt_ext}` for each split; later splits never repeat an earlier split's source."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    order = sorted(sizes, key=lambda s: (s != "train", s))  # train first, so valid/test avoid its sources
    seen: set[str] = set()
    stats = {}
    for split in order:
        pairs: list[tuple[str, str]] = []
        for src, tgt in iter_pairs(split_seed(seed, split), lexicon_scale=lexicon_scale, max_words=max_words):
            if len(pairs) == sizes[split]:
                break
            if split != "train" and src in seen:
                continue
            pairs.append((src, tgt))
        seen.update(p[0] for p in pairs)
        _write_lines(out_dir / f"{split}.{src_ext}", [p[0] for p in pairs])
        _write_lines(out_dir / f"{split}.{tgt_ext}", [p[1] for p in pairs])
        stats[split] = dict(
            pairs=len(pairs),
            src_words=sum(len(p[0].split()) for p in pairs),
            tgt_words=sum(len(p[1].split()) for p in pairs),
        )
    return stats
