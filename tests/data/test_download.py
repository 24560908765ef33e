"""Downloads against a real local HTTP server: full, resumed, restarted, dropped, corrupted, cached; extraction."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import ssl
import tarfile
from pathlib import Path

import pytest

import aiayn.data.download as dl
from aiayn.data.archive import ArchiveError, extract
from aiayn.data.download import (
    ChecksumError,
    DownloadError,
    RetryPolicy,
    UnverifiedWarning,
    download,
    fetch,
)

_spec = importlib.util.spec_from_file_location("aiayn_tests_http_server", Path(__file__).with_name("http_server.py"))
http_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_server)

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB, every byte value, so an off-by-one append changes the sum
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def server():
    with http_server.FileServer({"blob.bin": PAYLOAD}) as srv:
        yield srv


def policy(**kw) -> RetryPolicy:
    return RetryPolicy(**{"backoff_s": 0.0, "backoff_max_s": 0.0, **kw})


def _get(server, dest: Path, retries: int = 8, stall_s: float = 60.0, **kw) -> Path:
    return download(
        server.url + "blob.bin",
        dest,
        SHA,
        progress=False,
        chunk_size=4096,
        policy=policy(retries=retries, stall_s=stall_s),
        **kw,
    )


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
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:10])  # an earlier run's progress
    server.statuses["blob.bin"] = [503] * 5  # then a server that adds nothing
    with pytest.raises(DownloadError, match=r"blob.bin: gave up after 2 attempts in a row that added nothing"):
        _get(server, tmp_path / "blob.bin", retries=1)
    assert (tmp_path / "blob.bin.part").stat().st_size == 10  # kept: the next run resumes it


def test_five_drops_while_progressing_never_exhaust_the_budget(server, tmp_path):
    """A transfer that keeps advancing is never abandoned, however many times it drops (retries=1 here)."""
    server.drops["blob.bin"] = [100_000, 300_000, 500_000, 700_000, 900_000]
    dest = _get(server, tmp_path / "blob.bin", retries=1)
    assert dest.read_bytes() == PAYLOAD
    assert [r for _, r in server.requests] == [None] + [
        f"bytes={n}-" for n in (100_000, 300_000, 500_000, 700_000, 900_000)
    ]


def test_a_stalled_server_is_abandoned_after_stall_s_and_resumed(server, tmp_path):
    server.stall_after["blob.bin"] = (200_000, 3.0)
    dest = _get(server, tmp_path / "blob.bin", stall_s=0.5)
    assert dest.read_bytes() == PAYLOAD
    # Resumed where the .part ended: at most the 200000 bytes sent (a buffered read lost to the timeout is refetched).
    (_, first), (_, second) = server.requests
    assert first is None and 0 < int(second[6:-1]) <= 200_000


class _TLSCutResponse:
    """A real HTTP response whose stream dies after `cut` bytes with the SSL error a dropped TLS connection gives."""

    def __init__(self, response, cut: int, error: type[ssl.SSLError]) -> None:
        self.response, self.left, self.error = response, cut, error
        self.status, self.headers = response.status, response.headers

    def read(self, size: int) -> bytes:
        if self.left <= 0:
            raise self.error("EOF occurred in violation of protocol (_ssl.c:2427)")
        data = self.response.read(min(size, self.left))
        self.left -= len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.response.close()


@pytest.mark.parametrize("error", [ssl.SSLEOFError, ssl.SSLError, ConnectionResetError])
def test_a_tls_stream_cut_mid_transfer_is_resumed(server, tmp_path, monkeypatch, error):
    real_open, cuts = dl._open, [250_000, 640_000]

    def cut_open(request, timeout):
        response = real_open(request, timeout)
        if not cuts:
            return response
        offset = int((request.get_header("Range") or "bytes=0-")[6:-1])
        return _TLSCutResponse(response, cuts.pop(0) - offset, error)

    monkeypatch.setattr(dl, "_open", cut_open)
    dest = _get(server, tmp_path / "blob.bin", retries=0)  # each cut made progress: no budget used
    assert dest.read_bytes() == PAYLOAD
    assert [r for _, r in server.requests] == [None, "bytes=250000-", "bytes=640000-"]


def test_backoff_doubles_without_progress_is_capped_and_jittered():
    rule = RetryPolicy(backoff_s=2.0, backoff_max_s=10.0)
    waits = [[rule.wait(k) for k in range(6)] for _ in range(200)]
    for k, expected in enumerate((2, 2, 4, 8, 10, 10)):
        column = [w[k] for w in waits]
        assert expected / 2 <= min(column) and max(column) <= expected and max(column) - min(column) > 0.1


def test_waits_between_attempts_follow_the_policy(server, tmp_path):
    server.statuses["blob.bin"] = [503] * 3
    slept: list[float] = []
    with pytest.raises(DownloadError):
        download(
            server.url + "blob.bin",
            tmp_path / "b",
            SHA,
            progress=False,
            sleep=slept.append,
            policy=RetryPolicy(retries=2, backoff_s=1.0, backoff_max_s=1.5),
        )
    assert len(slept) == 2 and 0.5 <= slept[0] <= 1.0 and 0.75 <= slept[1] <= 1.5  # then gave up: 3 > retries


def test_a_verified_archive_is_not_hashed_again(server, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    got = fetch("blob.bin", "https://nowhere/blob.bin", cache, server.url, SHA, progress=False, policy=policy())
    hashed: list[Path] = []
    real = dl.file_digest
    monkeypatch.setattr(dl, "file_digest", lambda path, *a, **k: hashed.append(Path(path)) or real(path, *a, **k))
    fetch("blob.bin", "https://nowhere/blob.bin", cache, server.url, SHA, progress=False)
    assert hashed == [] and len(server.requests) == 1  # remembered by size and mtime: neither fetched nor hashed
    got.write_bytes(PAYLOAD[::-1])  # a changed file (new mtime) is hashed again, and refused
    with pytest.raises(ChecksumError):
        fetch("blob.bin", "https://nowhere/blob.bin", cache, server.url, SHA, progress=False)
    assert hashed


def test_a_cached_archive_under_its_old_ambiguous_name_is_adopted_not_downloaded(server, tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "blob.bin").write_bytes(PAYLOAD)  # cached before names were unique per source
    got = fetch(
        "wmt13-blob.bin",
        "https://nowhere/wmt13/blob.bin",
        tmp_path / "cache",
        server.url,
        SHA,
        progress=False,
        legacy_filename="blob.bin",
    )
    assert got.name == "wmt13-blob.bin" and got.read_bytes() == PAYLOAD and server.requests == []


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


def test_members_are_matched_with_or_without_a_leading_dot_slash(tmp_path):
    archive = tmp_path / "dot.tgz"  # as `tar -C dir -czf a.tgz .` writes it
    archive.write_bytes(_tar({"./test/newstest2013-src.en.sgm": b"<seg>\n", "././training/x.de": b"hallo\n"}))
    got = extract(archive, tmp_path / "out", ["test/newstest2013-src.en.sgm", "training/x.de"], progress=False)
    assert got["training/x.de"].read_bytes() == b"hallo\n" and got["training/x.de"] == tmp_path / "out/training/x.de"
    assert sorted(extract(archive, tmp_path / "all", progress=False)) == [
        "test/newstest2013-src.en.sgm",
        "training/x.de",
    ]


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


def test_a_mirror_folder_with_the_datasets_own_file_names_is_read(tmp_path: Path):
    """A mirror folder laid out with the server's names (Multi30k's val.lc.norm.tok.en, not the cache's
    multi30k-val.lc.norm.tok.en) is read once the file verifies; without either, one line says both names."""
    from aiayn.data.sources.catalog import MULTI30K_TOK

    archive = MULTI30K_TOK.archive("multi30k-val.lc.norm.tok.en")
    assert archive.filename == "multi30k-val.lc.norm.tok.en" and archive.legacy_filename == "val.lc.norm.tok.en"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(
        dl.DownloadError, match=r"has no multi30k-val.lc.norm.tok.en \(or val.lc.norm.tok.en, the server"
    ):
        dl.fetch(archive.filename, archive.url, tmp_path / "cache", mirror, archive.sha256,
                 legacy_filename=archive.legacy_filename)  # fmt: skip
    (mirror / "val.lc.norm.tok.en").write_text("not Multi30k\n")
    with pytest.raises(Exception, match="sha256"):  # the server's name is taken only for the file it names
        dl.fetch(archive.filename, archive.url, tmp_path / "cache", mirror, archive.sha256,
                 legacy_filename=archive.legacy_filename)  # fmt: skip
