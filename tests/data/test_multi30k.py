"""Multi30k end to end against a local HTTP server and a mirror folder: the published files' real bytes where a git
snapshot of github.com/multi30k/dataset is at hand (AIAYN_MULTI30K_GIT, default ../.mirror/multi30k+dataset/repo),
and small gzipped files made here, with their own sums, everywhere."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from aiayn.config.composition import CONF_DIR, compose
from aiayn.config.resolve import prepare
from aiayn.data.download import ChecksumError, DownloadError
from aiayn.data.sources import multi30k
from aiayn.data.sources.catalog import MULTI30K, WMT14, TextPairSpec
from aiayn.data.sources.multi30k import prepare_multi30k
from aiayn.data.sources.remote import TestSetError

_spec = importlib.util.spec_from_file_location("aiayn_tests_http_server", Path(__file__).with_name("http_server.py"))
http_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_server)

REPO = Path(__file__).resolve().parents[2]
MULTI30K_GIT = Path(os.environ.get("AIAYN_MULTI30K_GIT", REPO.parent / ".mirror" / "multi30k+dataset" / "repo"))
SPLITS = ("train", "valid", "test")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Files to serve (cache name -> bytes), the catalog entry that verifies them, and each split's lines."""

    files: dict[str, bytes]
    spec: TextPairSpec
    lines: dict[str, int]


def _respec(spec: TextPairSpec, *, files: dict[str, bytes] | None = None, base: str | None = None, **lines: int):
    """`spec` with each file's sha256 taken from `files`, its URL's path moved under `base`, and split sizes."""

    def archive(a):
        if files is not None:
            a = dataclasses.replace(a, sha256=hashlib.sha256(files[a.filename]).hexdigest())
        if base is not None:
            a = dataclasses.replace(a, url=base + urlsplit(a.url).path.lstrip("/"))
        return a

    def split(name: str):
        s = getattr(spec, name)
        files_ = tuple((lang, archive(a)) for lang, a in s.files)
        return dataclasses.replace(s, files=files_, expected_lines=lines.get(name, s.expected_lines))

    return dataclasses.replace(spec, **{name: split(name) for name in SPLITS})


def _synthetic() -> Corpus:
    """Caption-like lines in each split; train holds one pair the length-ratio filter drops."""
    sizes = {"train": 40, "valid": 6, "test": 5}
    files = {}
    for name, n in sizes.items():
        en = [f"a dog runs across the {name} field number {i} ." for i in range(n)]
        de = [f"ein Hund läuft über das Feld {name} Nummer {i} ." for i in range(n)]
        if name == "train":
            en[3], de[3] = "hi", " ".join(["Wort"] * 30)
        for lang, text in (("en", en), ("de", de)):
            data = gzip.compress(("\n".join(text) + "\n").encode("utf-8"), mtime=0)
            files[getattr(MULTI30K, name).archive(lang).filename] = data
    return Corpus(files, _respec(MULTI30K, files=files, **sizes), sizes)


def _real() -> Corpus:
    """The six published files, read from the git snapshot; the test skips when it is not there."""
    if shutil.which("git") is None or not MULTI30K_GIT.is_dir():
        pytest.skip(f"no git snapshot of multi30k/dataset at {MULTI30K_GIT} (set AIAYN_MULTI30K_GIT)")
    files = {}
    for archive in MULTI30K.archives:
        path = "data/task1/raw/" + archive.url.rsplit("/", 1)[-1]
        shown = subprocess.run(["git", "-C", str(MULTI30K_GIT), "show", f"HEAD:{path}"], capture_output=True)
        if shown.returncode:
            pytest.skip(f"{MULTI30K_GIT} has no {path}: {shown.stderr.decode(errors='replace').strip()}")
        files[archive.filename] = shown.stdout
    return Corpus(files, MULTI30K, {"train": 29000, "valid": 1014, "test": 1000})


@pytest.fixture(scope="module", params=["synthetic", "real"])
def corpus(request) -> Corpus:
    return _synthetic() if request.param == "synthetic" else _real()


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _check_output(out: Path, corpus: Corpus, stats: dict) -> None:
    """The six files and stats.json: every dev/test line kept, train as cleaning left it."""
    assert json.loads((out / "stats.json").read_text()) == stats
    assert stats["source"] == "multi30k" and stats["test_set"] == corpus.spec.test.description
    for split in ("valid", "test"):
        assert stats[split]["kept"] == corpus.lines[split]
        assert len(_lines(out / f"{split}.src")) == len(_lines(out / f"{split}.tgt")) == corpus.lines[split]
    train = stats["train"]
    assert train["read"] == corpus.lines["train"] and not train["stopped_at_max_pairs"]
    assert train["kept"] + sum(train["dropped"].values()) == train["read"]
    assert len(_lines(out / "train.src")) == len(_lines(out / "train.tgt")) == train["kept"]
    assert stats["test"]["set"] == "test_2016_flickr" and stats["valid"]["set"] == "val"
    assert set(stats["archives"]) == set(corpus.files)


def fetch_stage():
    """pipeline/fetch.py's run(), as DVC's fetch stage calls it."""
    spec = importlib.util.spec_from_file_location("pipeline_fetch", REPO / "pipeline" / "fetch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def test_the_fetch_stage_downloads_verifies_and_caches(corpus, tmp_path, monkeypatch):
    """data=multi30k with data.mirror at the server: each file fetched once, verified, gunzipped and cleaned; a
    second fetch reads the cache and asks the server nothing."""
    monkeypatch.setattr(multi30k, "MULTI30K", corpus.spec)  # the synthetic files' own sums; the real files: the catalog
    run = fetch_stage()
    with http_server.FileServer(corpus.files) as server:

        def cfg(raw: str):
            return prepare(
                compose(
                    ["data=multi30k", f"paths.raw={tmp_path / raw}", f"data.cache_dir={tmp_path / 'cache'}"]
                    + [f"data.mirror={server.url}", "data.download.backoff_s=0", "data.download.backoff_max_s=0"]
                )
            )

        stats = run(cfg("raw"))
        _check_output(tmp_path / "raw", corpus, stats)
        assert sorted(name for name, _ in server.requests) == sorted(corpus.files)  # one request per file
        assert all(
            f"{server.url} (mirror of https://raw.githubusercontent.com/multi30k/" in where
            for where in stats["archives"].values()
        )
        cached = {p.name for p in (tmp_path / "cache").iterdir() if p.is_file()}
        assert cached == set(corpus.files)  # under their source-unique names
        again = run(cfg("again"))
        assert len(server.requests) == len(corpus.files)  # verified files in the cache are not downloaded again
    assert again["train"] == stats["train"]
    for name in ("train.src", "train.tgt", "valid.tgt", "test.src"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "raw" / name).read_bytes()


def test_the_official_urls_are_used_without_a_mirror(corpus, tmp_path):
    """The catalog's URLs (their path kept, the host moved to the local server) with the pinned sums."""
    files = {urlsplit(a.url).path.lstrip("/"): corpus.files[a.filename] for a in corpus.spec.archives}
    assert all(path.startswith("multi30k/dataset/master/data/task1/raw/") for path in files)
    with http_server.FileServer(files) as server:
        spec = _respec(corpus.spec, base=server.url)
        stats = prepare_multi30k(tmp_path / "raw", tmp_path / "cache", progress=False, spec=spec)
        assert sorted(name for name, _ in server.requests) == sorted(files)
    _check_output(tmp_path / "raw", corpus, stats)
    assert stats["archives"]["multi30k-val.de.gz"] == f"{server.url}multi30k/dataset/master/data/task1/raw/val.de.gz"
    assert {p.name for p in (tmp_path / "cache").iterdir() if p.is_file()} == set(corpus.files)


def test_a_mirror_folder_serves_every_file_in_place(corpus, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, data in corpus.files.items():
        (mirror / name).write_bytes(data)
    stats = prepare_multi30k(tmp_path / "raw", tmp_path / "cache", mirror, progress=False, spec=corpus.spec)
    _check_output(tmp_path / "raw", corpus, stats)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_file()]  # read in place, nothing downloaded
    assert stats["archives"]["multi30k-train.en.gz"].startswith(f"{mirror} (mirror of https://")
    (mirror / "multi30k-test_2016_flickr.de.gz").unlink()
    with pytest.raises(DownloadError, match=r"mirror folder .*mirror has no multi30k-test_2016_flickr\.de\.gz"):
        prepare_multi30k(tmp_path / "raw2", tmp_path / "cache", mirror, progress=False, spec=corpus.spec)


def test_a_wrong_checksum_is_refused_naming_the_file(tmp_path):
    """Files other than the published ones (here the synthetic ones) fail the catalog's pinned sums."""
    synthetic = _synthetic()
    with (
        http_server.FileServer(synthetic.files) as server,
        pytest.raises(
            ChecksumError,
            match=rf"checksum mismatch for multi30k-val\.en\.gz.* from {server.url}multi30k-val\.en\.gz: "
            f"expected sha256 {MULTI30K.valid.archive('en').sha256}",
        ),
    ):
        prepare_multi30k(tmp_path / "raw", tmp_path / "cache", server.url, progress=False)
    assert not (tmp_path / "raw" / "valid.src").exists() and not (tmp_path / "cache" / "multi30k-val.en.gz").exists()
    assert len(list((tmp_path / "cache").glob("multi30k-val.en.gz.bad-*"))) == 1  # the bad download kept aside


def test_a_split_of_the_wrong_size_is_refused(tmp_path):
    synthetic = _synthetic()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, data in synthetic.files.items():
        (mirror / name).write_bytes(data)
    spec = _respec(synthetic.spec, test=1000)
    with pytest.raises(TestSetError, match=r"multi30k-test_2016_flickr.en: 5 lines, but test_2016_flickr has 1000"):
        prepare_multi30k(tmp_path / "raw", tmp_path / "cache", mirror, progress=False, spec=spec)
    assert not (tmp_path / "raw" / "test.src").exists()  # nothing written for a refused set
    capped = prepare_multi30k(
        tmp_path / "raw",
        tmp_path / "cache",
        mirror,
        max_train_pairs=10,
        progress=False,
        spec=_respec(synthetic.spec, train=29000),
        src_lang="de",
        tgt_lang="en",
    )
    assert capped["train"]["kept"] == 10 and capped["train"]["stopped_at_max_pairs"]  # a capped read checks no size
    assert _lines(tmp_path / "raw" / "test.src")[0] == "ein Hund läuft über das Feld test Nummer 0 ."  # de -> en


def test_the_catalog_entry_and_the_config():
    names = [a.filename for a in MULTI30K.archives]
    assert sorted(names) == sorted(
        f"multi30k-{split}.{lang}.gz" for split in ("train", "val", "test_2016_flickr") for lang in ("en", "de")
    )
    wmt = {a.filename for spec in WMT14.values() for a in spec.archives}
    assert not set(names) & wmt  # one mirror folder holds both corpora
    base = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
    assert all(a.url == base + a.filename.removeprefix("multi30k-") for a in MULTI30K.archives)
    assert all(a.sha256 and len(a.sha256) == 64 for a in MULTI30K.archives)
    assert all(a.legacy_filename == a.filename.removeprefix("multi30k-") for a in MULTI30K.archives)  # its own name
    sizes = (MULTI30K.train.expected_lines, MULTI30K.valid.expected_lines, MULTI30K.test.expected_lines)
    assert sizes == (29000, 1014, 1000)
    cfg = compose(["data=multi30k", "scale=small"]).data
    assert (cfg.name, cfg.src_lang, cfg.tgt_lang, cfg.vocab_size, cfg.path) == ("multi30k", "en", "de", 8000, None)
    assert "../" not in (CONF_DIR / "data" / "multi30k.yaml").read_text()  # nothing outside the repository
    with pytest.raises(ValueError, match="do not match multi30k"):
        prepare_multi30k(Path("unused"), Path("unused"), src_lang="en", tgt_lang="fr")


def test_every_remote_corpus_of_the_catalog_is_a_data_name_the_schema_offers():
    """The catalog names the remote corpora; the schema's data.name must offer each (and cost/plan.py sizes each)."""
    from aiayn.config.schema import DATA_SOURCES
    from aiayn.cost.plan import CORPORA

    remote = {MULTI30K.name, *WMT14}
    assert remote <= set(DATA_SOURCES) and set(DATA_SOURCES) - remote == {"synthetic", "local"}
    assert set(CORPORA) <= set(DATA_SOURCES)


SHARED_TOK = REPO.parent / "shared" / "data" / "multi30k-tok"


def test_the_literatures_tokenised_form_is_fetched_verified_and_kept_line_for_line(tmp_path):
    """data.form=lc.norm.tok: the repository's data/task1/tok files (plain text), served from a mirror folder under
    their cache names, verified against the pinned sums, dev and test kept line for line."""
    from aiayn.data.sources.catalog import MULTI30K_TOK

    if not SHARED_TOK.is_dir():
        pytest.skip(f"no {SHARED_TOK} (the published lc.norm.tok files)")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for archive in MULTI30K_TOK.archives:
        shutil.copy(SHARED_TOK / archive.url.rsplit("/", 1)[-1], mirror / archive.filename)
    base = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok/"
    assert all(a.url == base + a.filename.removeprefix("multi30k-") for a in MULTI30K_TOK.archives)
    cfg = compose(
        ["data=multi30k_tok", f"paths.raw={tmp_path / 'raw'}", f"data.mirror={mirror}"]
        + [f"data.cache_dir={tmp_path / 'cache'}"]
    )
    stats = fetch_stage()(prepare(cfg))
    raw = tmp_path / "raw"
    assert stats["test_set"] == MULTI30K_TOK.test.description and stats["valid"]["kept"] == 1014
    for split, name in (("test", "test_2016_flickr"), ("valid", "val")):
        assert _lines(raw / f"{split}.src") == _lines(SHARED_TOK / f"{name}.lc.norm.tok.en")
        assert _lines(raw / f"{split}.tgt") == _lines(SHARED_TOK / f"{name}.lc.norm.tok.de")
    assert stats["train"]["read"] == 29000 and stats["train"]["kept"] > 28900
    assert _lines(raw / "test.tgt")[0] == "ein mann mit einem orangefarbenen hut , der etwas anstarrt ."
    (mirror / "multi30k-val.lc.norm.tok.de").write_text("tampered\n")
    with pytest.raises(ChecksumError, match=r"multi30k-val\.lc\.norm\.tok\.de"):
        fetch_stage()(
            prepare(
                compose(
                    [
                        "data=multi30k",
                        "data.form=lc.norm.tok",
                        f"paths.raw={tmp_path / 'r2'}",
                        f"data.mirror={mirror}",
                        f"data.cache_dir={tmp_path / 'cache2'}",
                    ]
                )
            )
        )
