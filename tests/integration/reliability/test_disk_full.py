"""A full disk at each writer: one clear line naming the file, the bytes it needed and the bytes free; nothing
half-written that a rerun would trust (a download's .part stays: it resumes); after space is freed, a rerun
finishes without losing finished work.

The disk is real: a tmpfs mounted for the test (root on Linux, as on this project's machines), grown with
`mount -o remount,size=...` to stand for freeing space. Where mounting is not allowed, the writers are given an
injected OSError(ENOSPC) instead.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

from aiayn.io import DiskFullError, atomic_write_json

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("aiayn_tests_http_server", REPO / "tests" / "data" / "http_server.py")
http_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_server)


class SmallDisk:
    """A tmpfs of `size` bytes at `path`; `grow(size)` frees space without touching what is on it."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        path.mkdir(parents=True)
        self._mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))

    def _mount(self, *args: str) -> None:
        proc = subprocess.run(["mount", *args], capture_output=True, text=True)
        if proc.returncode:
            raise PermissionError(proc.stderr.strip())

    def grow(self, size: int) -> None:
        self._mount("-o", f"remount,size={size}", str(self.path))

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """`small_disk(size)` -> SmallDisk; skips where this machine does not let the test mount a tmpfs."""
    disks: list[SmallDisk] = []

    def make(size: int) -> SmallDisk:
        if not shutil.which("mount") or os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root; the injected-ENOSPC tests cover the writers")
        try:
            disks.append(SmallDisk(tmp_path / f"disk-{uuid.uuid4().hex[:6]}", size))
        except PermissionError as err:
            pytest.skip(f"cannot mount a tmpfs here ({err}); the injected-ENOSPC tests cover the writers")
        return disks[-1]

    yield make
    for disk in disks:
        disk.close()


PAYLOAD = os.urandom(3 << 20)  # 3 MiB, incompressible
SHA = hashlib.sha256(PAYLOAD).hexdigest()


def test_a_download_meets_a_full_disk_keeps_its_part_and_resumes_when_space_is_freed(small_disk):
    from aiayn.data.download import RetryPolicy, download

    disk = small_disk(1 << 20)
    with http_server.FileServer({"big.tgz": PAYLOAD}) as server:
        with pytest.raises(DiskFullError) as err:
            download(
                server.url + "big.tgz",
                disk.path / "big.tgz",
                SHA,
                progress=False,
                chunk_size=1 << 16,
                policy=RetryPolicy(backoff_s=0, backoff_max_s=0),
            )
        message = str(err.value)
        part = disk.path / "big.tgz.part"
        assert f"writing {part}" in message and "bytes free there" in message and "needs " in message
        needed = int(message.split("needs ")[1].split(" bytes")[0].replace(",", ""))
        assert needed == len(PAYLOAD) - part.stat().st_size  # what is still to come
        assert part.stat().st_size > 0 and not (disk.path / "big.tgz").exists()  # nothing a rerun would trust
        disk.grow(8 << 20)
        got = download(server.url + "big.tgz", disk.path / "big.tgz", SHA, progress=False)
        assert got.read_bytes() == PAYLOAD
        assert server.requests[-1][1] == f"bytes={len(PAYLOAD) - needed}-"  # resumed, not restarted


def test_extraction_to_a_full_disk_names_the_member_and_what_it_needs(small_disk, tmp_path):
    import io
    import tarfile

    from aiayn.data.archive import extract

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("training/small.en", "training/big.de"):
            data = b"x" * 1000 if name.endswith(".en") else PAYLOAD
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "corpus.tar"
    archive.write_bytes(buf.getvalue())
    disk = small_disk(1 << 20)
    with pytest.raises(DiskFullError, match=rf"big\.de: needs {len(PAYLOAD):,} bytes, [\d,]+ bytes free"):
        extract(archive, disk.path / "x", progress=False)
    assert (disk.path / "x" / "training" / "small.en").read_bytes() == b"x" * 1000  # finished members stay
    assert not list((disk.path / "x" / "training").glob(".*.tmp")) and not (disk.path / "x/training/big.de").exists()
    disk.grow(8 << 20)
    assert extract(archive, disk.path / "x", progress=False)["training/big.de"].read_bytes() == PAYLOAD


def _cli(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
    return subprocess.run(
        [sys.executable, str(REPO / "pipeline" / f"{script}.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_stage_that_fills_the_disk_ends_with_one_line_and_a_rerun_finishes(small_disk, tmp_path):
    """fetch into a 256 KiB disk: one line on stderr, no half-written corpus; grown, the same command finishes.
    Then training whose second checkpoint does not fit: the first stays whole, and the rerun resumes from it."""
    disk = small_disk(256 << 10)
    raw = disk.path / "raw"
    fetch = ("scale=smoke", "logger=none", f"paths.raw={raw}", f"hydra.run.dir={tmp_path}/out", "data.train_size=20000")
    proc = _cli("fetch", *fetch, cwd=tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no space left on the device writing ") and "bytes free there" in last, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (raw / "train.src").exists() and not list(raw.glob(".*.tmp"))  # nothing to trust
    disk.grow(64 << 20)
    assert _cli("fetch", *fetch, cwd=tmp_path).returncode == 0 and (raw / "stats.json").is_file()


def test_a_checkpoint_that_does_not_fit_leaves_the_last_one_whole_and_training_resumes(small_disk, tmp_path):
    data = tmp_path / "data"
    common = (
        "scale=smoke",
        "logger=none",
        "trainer.enable_progress_bar=false",
        f"paths.raw={data}/raw",
        f"paths.bpe={data}/bpe",
    )
    assert _cli("fetch", *common, f"hydra.run.dir={tmp_path}/o1", cwd=tmp_path).returncode == 0
    assert _cli("bpe", *common, f"hydra.run.dir={tmp_path}/o2", cwd=tmp_path).returncode == 0
    disk = small_disk(1600 << 10)  # room for one full checkpoint and its snapshot, not for the next alongside
    train = (*common, f"paths.runs={disk.path}/runs", f"hydra.run.dir={tmp_path}/o3")
    proc = _cli("train", *train, cwd=tmp_path)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode != 0 and last.startswith("error: no space left on the device writing "), proc.stderr
    ckpt = disk.path / "runs" / "base" / "seed1" / "checkpoints" / "last.ckpt"
    step = torch.load(ckpt, weights_only=True)["global_step"]  # loads: whole, never half-written
    assert 0 < step < 12 and not list(ckpt.parent.glob(".*.tmp"))
    disk.grow(64 << 20)
    again = _cli("train", *train, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "/runs/base/seed1: resuming from " in again.stdout + again.stderr
    assert (disk.path / "runs" / "base" / "seed1" / "train.json").is_file()


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_injected_enospc_at_an_atomic_write_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "results" / "metrics.json"
    atomic_write_json(target, {"old": 1})
    monkeypatch.setattr(Path, "write_text", _enospc)
    with pytest.raises(DiskFullError, match=rf"writing {target}: needs more space, [\d,]+ bytes free"):
        atomic_write_json(target, {"new": 2})
    monkeypatch.undo()
    assert target.read_text().strip().startswith("{") and '"old"' in target.read_text()  # the old file, whole
    assert not list(target.parent.glob(".*.tmp"))


def test_injected_enospc_at_each_data_writer(tmp_path, monkeypatch):
    """The writers of fetch and bpe (cleaning, encoding) turn ENOSPC into DiskFullError and leave nothing behind."""
    import builtins

    from aiayn.data import binary, clean
    from aiayn.data.clean import CleanOptions, clean_parallel
    from aiayn.data.tokenizer import Tokenizer, train_tokenizer

    real_open = builtins.open

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def full_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return Full(f) if any(c in mode for c in "wa") else f

    pairs = [("hello world", "hallo welt"), ("good day", "guten tag")] * 50
    monkeypatch.setattr(clean, "open", full_open, raising=False)
    with pytest.raises(DiskFullError, match=r"writing .*train\.(src|tgt)"):
        clean_parallel(
            pairs, tmp_path / "raw" / "train.src", tmp_path / "raw" / "train.tgt", CleanOptions(), train=True
        )
    assert not list((tmp_path / "raw").iterdir())
    monkeypatch.undo()
    clean_parallel(pairs, tmp_path / "raw" / "train.src", tmp_path / "raw" / "train.tgt", CleanOptions(), train=True)
    model = train_tokenizer(
        [tmp_path / "raw" / "train.src", tmp_path / "raw" / "train.tgt"],
        tmp_path / "spm",
        vocab_size=40,
        model_type="bpe",
        sample_size=1000,
        character_coverage=1.0,
        seed=1,
    )
    monkeypatch.setattr(binary, "open", full_open, raising=False)
    with pytest.raises(DiskFullError, match=r"writing .*train\.src\.bin"):
        binary.encode_split(
            Tokenizer(model), tmp_path / "raw" / "train.src", tmp_path / "raw" / "train.tgt", tmp_path / "bpe" / "train"
        )
    assert not list((tmp_path / "bpe").iterdir())  # no shard a rerun would trust


def test_injected_enospc_at_a_checkpoint_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    from aiayn.train import checkpointing

    path = tmp_path / "checkpoints" / "last.ckpt"
    io = checkpointing.AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 2, "w": torch.ones(10)}, path)
    monkeypatch.setattr(checkpointing.torch, "save", _enospc)
    with pytest.raises(DiskFullError, match=rf"writing {path}"):
        io.save_checkpoint({"global_step": 4, "w": torch.zeros(10)}, path)
    monkeypatch.undo()
    assert torch.load(path, weights_only=True)["global_step"] == 2 and not list(path.parent.glob(".*.tmp"))
