"""Downloads against a real local HTTP server: full, resumed, restarted, dropped, corrupted, cached; extraction."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

from aiayn.data.download import (ArchiveError, ChecksumError, DownloadError, UnverifiedWarning, download,
                                 extract, fetch)

_spec = importlib.util.spec_from_file_location("aiayn_tests_http_server", Path(__file__).with_name("http_server.py"))
http_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_server)

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB, every byte value, so an off-by-one append changes the sum
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def server():
    with http_server.FileServer({"blob.bin": PAYLOAD}) as srv:
        yield srv


def _get(server, dest: Path, **kw) -> Path:
    return download(server.url + "blob.bin", dest, SHA, progress=False, chunk_size=4096, backoff_s=0, **kw)


def test_full_download_is_verified_and_cached(server, tmp_path):
    dest = _get(server, tmp_path / "blob.bin")
    assert dest.read_bytes() == PAYLOAD
    assert not (tmp_path / "blob.bin.part").exists()
    _get(server, dest)  # a completed, verified file is not fetched again
    assert len(server.requests) == 1


def test_resume_appends_with_a_range_request(server, tmp_path):
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:300_001])
    dest = _get(server, tmp_path / "blob.bin")
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == [("blob.bin", "bytes=300001-")]


def test_server_ignoring_range_restarts_instead_of_appending(server, tmp_path):
    server.ignore_range = True
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:1000])
    assert _get(server, tmp_path / "blob.bin").read_bytes() == PAYLOAD


def test_complete_part_file_gets_416_and_is_accepted(server, tmp_path):
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD)
    assert _get(server, tmp_path / "blob.bin").read_bytes() == PAYLOAD


def test_dropped_connection_is_resumed(server, tmp_path):
    server.drop_after["blob.bin"] = 123_457
    dest = _get(server, tmp_path / "blob.bin")
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == [("blob.bin", None), ("blob.bin", "bytes=123457-")]


def test_retries_exhausted_is_an_error_naming_the_url(server, tmp_path):
    server.drop_after["blob.bin"] = 10
    with pytest.raises(DownloadError, match="blob.bin: gave up after 1 attempts"):
        _get(server, tmp_path / "blob.bin", retries=0)


def test_checksum_mismatch_names_both_sums_and_keeps_the_file(server, tmp_path):
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as err:
        download(server.url + "blob.bin", tmp_path / "blob.bin", wrong, progress=False)
    assert wrong in str(err.value) and SHA in str(err.value) and "blob.bin" in str(err.value)
    kept = list(tmp_path.glob("blob.bin.bad-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == PAYLOAD
    assert not (tmp_path / "blob.bin").exists()


def test_md5_is_accepted_when_it_is_what_is_published(server, tmp_path):
    md5 = hashlib.md5(PAYLOAD).hexdigest()
    dest = download(server.url + "blob.bin", tmp_path / "b", expected_md5=md5, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_unverified_download_warns_with_the_computed_sum(server, tmp_path):
    with pytest.warns(UnverifiedWarning, match=SHA):
        download(server.url + "blob.bin", tmp_path / "blob.bin", progress=False)


def test_http_404_is_an_error_naming_the_url(server, tmp_path):
    with pytest.raises(DownloadError, match="missing.bin: HTTP 404"):
        download(server.url + "missing.bin", tmp_path / "m", SHA, progress=False)


def test_mirror_url_and_mirror_folder(server, tmp_path):
    official = "https://www.statmt.org/nowhere/blob.bin"  # never contacted: the mirror is used
    got = fetch("blob.bin", official, tmp_path / "cache", server.url, SHA, progress=False)
    assert got.read_bytes() == PAYLOAD and got.parent == tmp_path / "cache"
    in_place = fetch("blob.bin", official, tmp_path / "other", got.parent, SHA, progress=False)
    assert in_place == got  # a mirror folder is read in place, not copied
    with pytest.raises(ChecksumError):
        fetch("blob.bin", official, tmp_path / "other", got.parent, "1" * 64, progress=False)
    assert got.exists()  # a mirror's file is never renamed aside


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_selected_members_and_gz_inside_tar(tmp_path):
    inner = gzip.compress(b"bonjour\n")
    archive = tmp_path / "a.tgz"
    archive.write_bytes(_tar({"training/x.en": b"hello\n", "training/x.de": b"hallo\n", "g.fr.gz": inner}))
    got = extract(archive, tmp_path / "out", ["training/x.de", "g.fr.gz"], progress=False)
    assert got["training/x.de"].read_bytes() == b"hallo\n"
    assert gzip.decompress(got["g.fr.gz"].read_bytes()) == b"bonjour\n"
    assert not (tmp_path / "out" / "training" / "x.en").exists()
    with pytest.raises(ArchiveError, match="has no member"):
        extract(archive, tmp_path / "out2", ["training/x.fr"], progress=False)


def test_extract_refuses_path_traversal(tmp_path):
    archive = tmp_path / "evil.tar"
    archive.write_bytes(_tar({"ok.txt": b"fine", "../escape.txt": b"evil"}, mode="w"))
    with pytest.raises(ArchiveError, match="unsafe member path"):
        extract(archive, tmp_path / "out", progress=False)
    assert not (tmp_path / "escape.txt").exists()


def test_truncated_archive_error_names_the_archive(tmp_path):
    data = _tar({"big.txt": bytes(range(256)) * 2000})
    archive = tmp_path / "cut.tgz"
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError, match="cut.tgz: truncated or corrupt"):
        extract(archive, tmp_path / "out", ["big.txt"], progress=False)
    assert not (tmp_path / "out" / "big.txt").exists()


def test_single_file_gz(tmp_path):
    archive = tmp_path / "corpus.en.gz"
    archive.write_bytes(gzip.compress(b"a\nb\n"))
    assert extract(archive, tmp_path / "out", progress=False)["corpus.en"].read_bytes() == b"a\nb\n"
