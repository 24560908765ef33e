"""WMT14 end to end against a local HTTP mirror serving archives laid out like the official ones."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import json
import tarfile
from html import escape
from pathlib import Path

import pytest

from aiayn.data.clean import CleanOptions
from aiayn.data.download import ChecksumError, RetryPolicy
from aiayn.data.sources.catalog import WMT14, wmt14_spec
from aiayn.data.sources.wmt14 import TestSetError, prepare_wmt14

_spec = importlib.util.spec_from_file_location("aiayn_tests_http_server", Path(__file__).with_name("http_server.py"))
http_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_server)

SPLITS = [f"{split}.{side}" for split in ("train", "valid", "test") for side in ("src", "tgt")]


def _tgz(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _sgm(lines: list[str], docs: int = 2) -> str:
    """A fake-SGML file like WMT's: segments spread over `docs` documents, ids restarting per document."""
    out, per_doc = ['<srcset setid="newstest" srclang="any">'], -(-len(lines) // docs)
    for d in range(docs):
        out.append(f'<doc sysid="ref" docid="doc{d}" genre="news" origlang="en">')
        chunk = lines[d * per_doc : (d + 1) * per_doc]
        out += [f'<seg id="{i}">{escape(text)}</seg>' for i, text in enumerate(chunk, 1)]
        out.append("</doc>")
    return "\n".join(out + ["</srcset>", ""])


@pytest.fixture(scope="module")
def mirror_files(shared_dir) -> dict[str, bytes]:
    """The official archive names and member paths, filled from the 10k-line WMT sample."""
    sample = shared_dir / "data" / "wmt14_sample"
    en = (sample / "train.en").read_text(encoding="utf-8").splitlines(keepends=True)
    de = (sample / "train.de").read_text(encoding="utf-8").splitlines(keepends=True)
    cuts = {"nc": (0, 3000), "ep": (3000, 6000), "cc": (6000, len(en))}
    part = {k: ("".join(en[a:b]), "".join(de[a:b])) for k, (a, b) in cuts.items()}
    dev = ['Ein "Test" & mehr', "zweiter Satz", "dritter"]
    return {
        "wmt14-training-parallel-nc-v9.tgz": _tgz(
            {
                "training/news-commentary-v9.de-en.en": part["nc"][0],
                "training/news-commentary-v9.de-en.de": part["nc"][1],
            }
        ),
        "wmt13-training-parallel-europarl-v7.tgz": _tgz(
            {"training/europarl-v7.de-en.en": part["ep"][0], "training/europarl-v7.de-en.de": part["ep"][1]}
        ),
        "wmt13-training-parallel-commoncrawl.tgz": _tgz(
            {"commoncrawl.de-en.en": part["cc"][0], "commoncrawl.de-en.de": part["cc"][1]}
        ),
        "wmt13-test.tgz": _tgz(
            {
                "test/newstest2013-src.en.sgm": _sgm(['A "test" & more', "second", "third"]),
                "test/newstest2013-src.de.sgm": _sgm(dev),
            }
        ),
        "wmt14-test-full.tgz": _tgz(
            {
                "test-full/newstest2014-deen-src.en.sgm": _sgm([line.strip() for line in en[:11]]),
                "test-full/newstest2014-deen-ref.de.sgm": _sgm([line.strip() for line in de[:11]]),
            }
        ),
    }


def _spec_for(files: dict[str, bytes], test_lines: int = 11):
    """The real en-de catalog entry with these archives' sums and the small test sets' sizes."""
    spec = wmt14_spec("wmt14_en_de")
    archives = tuple(
        dataclasses.replace(a, sha256=hashlib.sha256(files[a.filename]).hexdigest(), md5=None) for a in spec.archives
    )
    return dataclasses.replace(
        spec,
        archives=archives,
        valid=dataclasses.replace(spec.valid, expected_lines=3),
        test=dataclasses.replace(spec.test, expected_lines=test_lines),
    )


def test_prepare_wmt14_end_to_end_through_an_http_mirror(mirror_files, tmp_path):
    with http_server.FileServer(mirror_files) as server:
        stats = prepare_wmt14(
            "wmt14_en_de",
            tmp_path / "raw",
            tmp_path / "cache",
            server.url,
            CleanOptions(),
            progress=False,
            spec=_spec_for(mirror_files),
            policy=RetryPolicy(backoff_s=0, backoff_max_s=0),
        )
        out = tmp_path / "raw"
        assert sorted(p.name for p in out.iterdir()) == sorted(SPLITS + ["stats.json"])
        assert json.loads((out / "stats.json").read_text()) == stats
        assert "newstest2014-full, 3003 lines" in stats["test_set"] and stats["test"]["set"] == "newstest2014-full"
        assert stats["train"]["corpora_read"] == {"news-commentary-v9": 3000, "europarl-v7": 3000, "commoncrawl": 4000}
        train = stats["train"]
        assert train["read"] == 10000 and train["kept"] + sum(train["dropped"].values()) == 10000
        assert len((out / "train.src").read_text(encoding="utf-8").splitlines()) == train["kept"]
        # The SGM's entities as written, as sacreBLEU reads them (docs/departures.md#sgm-entities).
        assert (out / "valid.tgt").read_text(
            encoding="utf-8"
        ) == "Ein &quot;Test&quot; &amp; mehr\nzweiter Satz\ndritter\n"
        assert len((out / "test.src").read_text(encoding="utf-8").splitlines()) == 11
        n_requests = len(server.requests)
        prepare_wmt14(
            "wmt14_en_de",
            tmp_path / "again",
            tmp_path / "cache",
            server.url,
            progress=False,
            spec=_spec_for(mirror_files),
        )
        assert len(server.requests) == n_requests  # verified archives in the cache are not downloaded again


def test_capped_run_downloads_only_what_it_reads(mirror_files, tmp_path):
    with http_server.FileServer(mirror_files) as server:
        server.drop_after["wmt14-training-parallel-nc-v9.tgz"] = 5000  # and survives a dropped connection
        stats = prepare_wmt14(
            "wmt14_en_de",
            tmp_path / "raw",
            tmp_path / "cache",
            server.url,
            CleanOptions(),
            max_train_pairs=100,
            progress=False,
            spec=_spec_for(mirror_files),
            policy=RetryPolicy(backoff_s=0, backoff_max_s=0),
        )
        assert stats["train"]["kept"] == 100 and stats["train"]["stopped_at_max_pairs"]
        fetched = {name for name, _ in server.requests}
        assert fetched == {"wmt14-training-parallel-nc-v9.tgz", "wmt13-test.tgz", "wmt14-test-full.tgz"}


def test_a_test_set_of_the_wrong_size_is_refused(mirror_files, tmp_path):
    with http_server.FileServer(mirror_files) as server:
        with pytest.raises(TestSetError, match=r"11 segments, but newstest2014-full has 3003"):
            prepare_wmt14(
                "wmt14_en_de",
                tmp_path / "raw",
                tmp_path / "cache",
                server.url,
                progress=False,
                spec=_spec_for(mirror_files, test_lines=3003),
            )
        assert not (tmp_path / "raw" / "test.src").exists()


def test_real_catalog_sums_are_enforced(mirror_files, tmp_path):
    """Our hand-made archives are not the official ones, so the recorded published sums must reject them."""
    with (
        http_server.FileServer(mirror_files) as server,
        pytest.raises(ChecksumError, match="wmt13-test.tgz.*expected md5 48eca5d02f637af44e85186847141f67"),
    ):
        prepare_wmt14("wmt14_en_de", tmp_path / "raw", tmp_path / "cache", server.url, progress=False)


WMT14_ALL = {a for spec in WMT14.values() for a in spec.archives}


@pytest.mark.parametrize("name", sorted(WMT14))
def test_catalog_is_consistent(name):
    spec = wmt14_spec(name)
    names = {a.filename for a in spec.archives}
    assert {c.archive for c in spec.train} | {spec.valid.archive, spec.test.archive} == names
    assert all(
        a.url.startswith("https://www.statmt.org/") and a.url.endswith("/" + a.legacy_filename) for a in spec.archives
    )
    assert len({a.filename for a in WMT14_ALL}) == len(WMT14_ALL)  # unique: one mirror folder holds them all
    assert all(a.sha256 or a.md5 for a in spec.archives)  # every archive has its published sum recorded
    assert spec.test.expected_lines == 3003 and spec.valid.expected_lines == 3000
    with pytest.raises(ValueError, match="do not match"):
        prepare_wmt14(name, Path("unused"), Path("unused"), src_lang="en", tgt_lang="cs")
