"""The remote corpora: the WMT 2014 archives and Multi30k's task-1 files, their recorded checksums, member paths
and the dev/test sets' identities.

WMT checksums come from published tables, never from our own downloads:
- training archives: sha256 from TensorFlow Datasets' url_checksums/wmt13_translate.txt and wmt14_translate.txt
  (entries for the same www.statmt.org URLs);
- newstest2013 from wmt13/test.tgz. Departure: see docs/departures.md#wmt14-dev-archive
- test sets: md5 from sacreBLEU's DATASETS table ("wmt13" -> wmt13/test.tgz, "wmt14/full" -> wmt14/test-full.tgz).
Multi30k publishes no checksum table: its sha256 sums are of the files in its repository, github.com/multi30k/dataset
at commit a3d2e0d26b56f3846f66a952536ffed4e401d05a (data/task1/raw/*.gz, as committed in c9be912d and unchanged
since), the bytes raw.githubusercontent.com serves for them.
A None checksum makes the download warn and print the sum it computed, so a user can pin it here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Archive:
    """One downloadable file and its published checksum."""

    url: str
    sha256: str | None = None
    md5: str | None = None
    name: str | None = None  # its cache and mirror name where the server's folder does not make one unique

    @property
    def filename(self) -> str:
        """Its name in the cache and in a mirror: `name`, else the server's folder and the file ("wmt13-test.tgz"),
        unique per source, since several WMT years publish a test.tgz; one mirror folder holds every file side by
        side."""
        if self.name:
            return self.name
        folder, name = self.url.rstrip("/").rsplit("/", 2)[-2:]
        return f"{folder}-{name}"

    @property
    def legacy_filename(self) -> str | None:
        """The server's file name alone (the dataset's own, "val.lc.norm.tok.en"; the cache's name before names were
        made unique), accepted in a cache or mirror folder when its checksum verifies; None where it is `filename`."""
        server = self.url.rstrip("/").rsplit("/", 1)[-1]
        return None if server == self.filename else server


@dataclass(frozen=True)
class Corpus:
    """A parallel training corpus inside an archive; `member` is a path template with a `{lang}` field."""

    name: str
    archive: str
    member: str

    def path(self, lang: str) -> str:
        return self.member.format(lang=lang)


@dataclass(frozen=True)
class EvalSet:
    """A dev/test set in SGM: the source side is read from `src_member`, the reference side from `ref_member`."""

    name: str
    archive: str
    src_member: str
    ref_member: str
    expected_lines: int
    description: str

    def paths(self, src_lang: str, tgt_lang: str) -> tuple[str, str]:
        return self.src_member.format(lang=src_lang), self.ref_member.format(lang=tgt_lang)


@dataclass(frozen=True)
class PairSpec:
    """Everything `prepare_wmt14` needs for one language pair, in the order the training corpora are read."""

    name: str
    langs: tuple[str, str]
    archives: tuple[Archive, ...]
    train: tuple[Corpus, ...]
    valid: EvalSet
    test: EvalSet

    def archive(self, filename: str) -> Archive:
        for archive in self.archives:
            if archive.filename == filename:
                return archive
        raise KeyError(f"{self.name}: no archive {filename!r} in the catalog")


_STATMT = "https://www.statmt.org"
EUROPARL = Archive(
    f"{_STATMT}/wmt13/training-parallel-europarl-v7.tgz",
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
)
COMMONCRAWL = Archive(
    f"{_STATMT}/wmt13/training-parallel-commoncrawl.tgz",
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
)
NEWS_COMMENTARY = Archive(
    f"{_STATMT}/wmt14/training-parallel-nc-v9.tgz",
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
)
UN = Archive(
    f"{_STATMT}/wmt13/training-parallel-un.tgz",
    sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
)
GIGA_FREN = Archive(
    f"{_STATMT}/wmt10/training-giga-fren.tar", sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a"
)
# newstest2013 (the paper's dev set) as sacreBLEU's "wmt13" ships it: the same sentences as in WMT14's dev.tgz,
# but with a published checksum.
DEV_WMT13 = Archive(f"{_STATMT}/wmt13/test.tgz", md5="48eca5d02f637af44e85186847141f67")
TEST_FULL = Archive(f"{_STATMT}/wmt14/test-full.tgz", md5="a8cd784e006feb32ac6f3d9ec7eb389a")

NEWSTEST2013 = EvalSet(
    name="newstest2013",
    archive=DEV_WMT13.filename,
    src_member="test/newstest2013-src.{lang}.sgm",
    ref_member="test/newstest2013-src.{lang}.sgm",
    expected_lines=3000,
    description="newstest2013, 3000 lines (sacreBLEU wmt13)",
)


def _newstest2014_full(code: str) -> EvalSet:
    """newstest2014 as released after the evaluation: all 3003 lines (sacreBLEU `wmt14/full`)."""
    return EvalSet(
        name="newstest2014-full",
        archive=TEST_FULL.filename,
        src_member=f"test-full/newstest2014-{code}-src.{{lang}}.sgm",
        ref_member=f"test-full/newstest2014-{code}-ref.{{lang}}.sgm",
        expected_lines=3003,
        description="newstest2014-full, 3003 lines (sacreBLEU wmt14/full; NOT the 2737-line filtered set)",
    )


WMT14_EN_DE = PairSpec(
    name="wmt14_en_de",
    langs=("en", "de"),
    archives=(NEWS_COMMENTARY, EUROPARL, COMMONCRAWL, DEV_WMT13, TEST_FULL),
    # Smallest first, so a run capped by max_train_pairs downloads as little as it can.
    train=(
        Corpus("news-commentary-v9", NEWS_COMMENTARY.filename, "training/news-commentary-v9.de-en.{lang}"),
        Corpus("europarl-v7", EUROPARL.filename, "training/europarl-v7.de-en.{lang}"),
        Corpus("commoncrawl", COMMONCRAWL.filename, "commoncrawl.de-en.{lang}"),
    ),
    valid=NEWSTEST2013,
    test=_newstest2014_full("deen"),
)

# Departure: see docs/departures.md#wmt14-en-fr-size (these corpora give ~40.8M raw pairs; the paper says 36M).
WMT14_EN_FR = PairSpec(
    name="wmt14_en_fr",
    langs=("en", "fr"),
    archives=(NEWS_COMMENTARY, EUROPARL, COMMONCRAWL, UN, GIGA_FREN, DEV_WMT13, TEST_FULL),
    train=(
        Corpus("news-commentary-v9", NEWS_COMMENTARY.filename, "training/news-commentary-v9.fr-en.{lang}"),
        Corpus("europarl-v7", EUROPARL.filename, "training/europarl-v7.fr-en.{lang}"),
        Corpus("commoncrawl", COMMONCRAWL.filename, "commoncrawl.fr-en.{lang}"),
        Corpus("un", UN.filename, "un/undoc.2000.fr-en.{lang}"),
        Corpus("giga-fren", GIGA_FREN.filename, "giga-fren.release2.fixed.{lang}.gz"),
    ),
    valid=NEWSTEST2013,
    test=_newstest2014_full("fren"),
)

WMT14 = {spec.name: spec for spec in (WMT14_EN_DE, WMT14_EN_FR)}


def wmt14_spec(name: str) -> PairSpec:
    """The catalog entry for `data.name` (wmt14_en_de | wmt14_en_fr)."""
    if name not in WMT14:
        raise KeyError(f"data.name={name!r} is not a WMT14 pair; known: {sorted(WMT14)}")
    return WMT14[name]


@dataclass(frozen=True)
class TextSplit:
    """A split published as one gzipped plain-text file per language, one sentence a line, aligned by line."""

    name: str  # the publisher's name for it ("test_2016_flickr")
    files: tuple[tuple[str, Archive], ...]  # (language, its file)
    expected_lines: int
    description: str

    def archive(self, lang: str) -> Archive:
        for code, archive in self.files:
            if code == lang:
                return archive
        raise KeyError(f"{self.name}: no {lang!r} file in the catalog (languages {[code for code, _ in self.files]})")


@dataclass(frozen=True)
class TextPairSpec:
    """Everything `prepare_multi30k` needs: a corpus whose train, valid and test splits are each a TextSplit."""

    name: str
    langs: tuple[str, str]
    train: TextSplit
    valid: TextSplit
    test: TextSplit

    @property
    def archives(self) -> tuple[Archive, ...]:
        return tuple(archive for split in (self.train, self.valid, self.test) for _, archive in split.files)

    def archive(self, filename: str) -> Archive:
        for archive in self.archives:
            if archive.filename == filename:
                return archive
        raise KeyError(f"{self.name}: no file {filename!r} in the catalog")


_MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1"


def _multi30k_split(name: str, lines: int, description: str, form: str = "raw", **sha256: str) -> TextSplit:
    """One Multi30k task-1 split: `raw/{name}.{lang}.gz`, or with form "tok" the plain text
    `tok/{name}.lc.norm.tok.{lang}`; cached and mirrored under its file name prefixed with `multi30k-` (the server's
    folder would not tell it from another corpus's train.en.gz)."""
    file = "{name}.{lang}.gz" if form == "raw" else "{name}.lc.norm.tok.{lang}"
    files = tuple(
        (
            lang,
            Archive(
                f"{_MULTI30K}/{form}/{file.format(name=name, lang=lang)}",
                sha256=digest,
                name="multi30k-" + file.format(name=name, lang=lang),
            ),
        )
        for lang, digest in sha256.items()
    )
    return TextSplit(name, files, lines, description)


# Multi30k EN-DE task 1 (Elliott et al. 2016): image captions and their translations.
MULTI30K = TextPairSpec(
    name="multi30k",
    langs=("en", "de"),
    train=_multi30k_split(
        "train",
        29000,
        "Multi30k task 1 train, 29000 pairs",
        en="d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
        de="726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    ),
    valid=_multi30k_split(
        "val",
        1014,
        "Multi30k task 1 val, 1014 lines",
        en="14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
        de="f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    ),
    test=_multi30k_split(
        "test_2016_flickr",
        1000,
        "Multi30k task 1 test_2016_flickr, 1000 lines",
        en="611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
        de="9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    ),
)

# The same sets as the Multi30k literature scores them (data.form=lc.norm.tok): the repository's data/task1/tok files
# (scripts/task1-tokenize.sh: Moses lowercase.perl | normalize-punctuation.perl -l LANG | tokenizer.perl -l LANG),
# sha256 of the bytes at commit a3d2e0d26b56f3846f66a952536ffed4e401d05a. Their val.de holds 62 lines that differ
# from the raw val.de (other translations), so the two forms' dev sets are not the same text.
MULTI30K_TOK = TextPairSpec(
    name="multi30k",
    langs=("en", "de"),
    train=_multi30k_split(
        "train",
        29000,
        "Multi30k task 1 train, lowercased and tokenised, 29000 pairs",
        "tok",
        en="08925f8e0572bcd5a006702fc5fe20e2d77c6917d4eebd576fc20de6693c2119",
        de="cb5a23529b65ec2061f1dc446192a9c37382b63cc75f81a0be59d34894b3a505",
    ),
    valid=_multi30k_split(
        "val",
        1014,
        "Multi30k task 1 val, lowercased and tokenised, 1014 lines",
        "tok",
        en="46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec",
        de="97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00",
    ),
    test=_multi30k_split(
        "test_2016_flickr",
        1000,
        "Multi30k task 1 test_2016_flickr, lowercased and tokenised, 1000 lines",
        "tok",
        en="5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2",
        de="c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4",
    ),
)
