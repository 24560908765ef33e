"""Encoded splits on disk: flat token-id files the loader memory-maps, plus an index and a JSON header.

Layout of `{prefix}`: `.src.bin` and `.tgt.bin` hold all sequences back to back; `.idx.npy` is an int64 array of
shape (4, n) with rows (src offset, src length, tgt offset, tgt length), in tokens; `.json` holds the header.
Convention: a stored source sequence ends with EOS; a stored target has neither BOS nor EOS (batching adds BOS to
the decoder input and EOS to the decoder output).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from aiayn.data.tokenizer import Tokenizer, file_sha256
from aiayn.io import DiskFullError, is_disk_full
from aiayn.progress import Progress

FORMAT_VERSION = 1


def _tmp_beside(path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    return Path(tmp)


def _count_rest(fh) -> int:
    return sum(1 for _ in fh)


def _chunks(src_file: Path, tgt_file: Path, batch_lines: int):
    """Yield aligned (src_lines, tgt_lines) chunks; refuse files whose line counts differ."""
    with open(src_file, encoding="utf-8") as fs, open(tgt_file, encoding="utf-8") as ft:
        n = 0
        while True:
            src = list(itertools.islice(fs, batch_lines))
            tgt = list(itertools.islice(ft, batch_lines))
            if len(src) != len(tgt):
                n_src = n + len(src) + _count_rest(fs)
                n_tgt = n + len(tgt) + _count_rest(ft)
                raise ValueError(f"line counts differ: {src_file} has {n_src} lines, {tgt_file} has {n_tgt}")
            if not src:
                return
            n += len(src)
            yield [s.rstrip("\n") for s in src], [t.rstrip("\n") for t in tgt]


def encode_split(
    tokenizer: Tokenizer, src_file, tgt_file, out_prefix, batch_lines: int = 10000, tokenizer_path=None
) -> dict:
    """Stream-encode a parallel split into `{out_prefix}.{src.bin,tgt.bin,idx.npy,json}`; returns the header.

    `tokenizer_path` (the .model file) is hashed into the header; without it the loaded model bytes are hashed,
    which is the same digest.
    """
    src_file, tgt_file, prefix = Path(src_file), Path(tgt_file), Path(out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    dtype = np.uint16 if tokenizer.vocab_size < 2**16 else np.uint32
    paths = {k: Path(f"{prefix}.{k}") for k in ("src.bin", "tgt.bin", "idx.npy", "json")}
    tmps = {k: _tmp_beside(p) for k, p in paths.items()}
    src_lens: list[np.ndarray] = []
    tgt_lens: list[np.ndarray] = []
    lines = Progress(f"encode {prefix.name}", None, "pairs", always_last=False)  # the "encoded" line sums it up
    try:
        with open(tmps["src.bin"], "wb") as fs, open(tmps["tgt.bin"], "wb") as ft:
            for src, tgt in _chunks(src_file, tgt_file, batch_lines):
                lines.update(len(src))
                src_ids, tgt_ids = tokenizer.encode(src), tokenizer.encode(tgt)
                for s in src_ids:
                    s.append(tokenizer.eos_id)
                for ids, fh, lens in ((src_ids, fs, src_lens), (tgt_ids, ft, tgt_lens)):
                    lens.append(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
                    fh.write(np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype).tobytes())
        src_len = np.concatenate(src_lens) if src_lens else np.zeros(0, np.int64)
        tgt_len = np.concatenate(tgt_lens) if tgt_lens else np.zeros(0, np.int64)
        index = np.stack([_offsets(src_len), src_len, _offsets(tgt_len), tgt_len])  # (4, n)
        with open(tmps["idx.npy"], "wb") as f:
            np.save(f, index)
        header = dict(
            format=FORMAT_VERSION,
            dtype=np.dtype(dtype).name,
            n=len(src_len),
            src_tokens=int(src_len.sum()),
            tgt_tokens=int(tgt_len.sum()),
            vocab_size=tokenizer.vocab_size,
            tokenizer_sha256=file_sha256(tokenizer_path) if tokenizer_path else tokenizer.sha256,
            src_file=src_file.name,
            tgt_file=tgt_file.name,
            src_ends_with_eos=True,
            tgt_has_bos_eos=False,
            sha256=_files_sha256([tmps[k] for k in DATA_FILES]),
        )
        tmps["json"].write_text(json.dumps(header, indent=1) + "\n")
        for k in ("src.bin", "tgt.bin", "idx.npy", "json"):  # header last: it marks a complete split
            os.replace(tmps[k], paths[k])
        lines.finish()
    except OSError as err:
        if is_disk_full(err) and not isinstance(err, DiskFullError):
            written = {k: t.stat().st_size for k, t in tmps.items() if t.exists()}
            full = max(written, key=lambda k: written[k]) if written else "src.bin"
            raise DiskFullError(paths[full], written=sum(written.values())) from err
        raise
    finally:
        for t in tmps.values():
            t.unlink(missing_ok=True)
    return header


DATA_FILES = ("src.bin", "tgt.bin", "idx.npy")  # what a split's sha256 covers (the header describes them)


def _files_sha256(paths) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def split_sha256(prefix) -> str:
    """The sha256 of an encoded split's token and index files: from its header, where encode_split records it, or
    hashed now for a header without one."""
    header = json.loads(Path(f"{prefix}.json").read_text())
    return header.get("sha256") or _files_sha256([Path(f"{prefix}.{k}") for k in DATA_FILES])


def _offsets(lens: np.ndarray) -> np.ndarray:
    out = np.zeros_like(lens)
    np.cumsum(lens[:-1], out=out[1:])
    return out


class EncodedSplit:
    """Memory-mapped view of an encoded split written by `encode_split`."""

    def __init__(self, prefix):
        self.prefix = Path(prefix)
        header_path = Path(f"{self.prefix}.json")
        if not header_path.is_file():
            raise FileNotFoundError(f"encoded split header not found: {header_path}")
        try:
            self.header = json.loads(header_path.read_text())
            dtype, n = np.dtype(self.header["dtype"]), int(self.header["n"])
        except (ValueError, KeyError) as e:
            raise ValueError(f"{header_path}: malformed header ({e!r})") from e
        idx_path = Path(f"{self.prefix}.idx.npy")
        index = np.load(idx_path, mmap_mode="r")
        if index.shape != (4, n):
            raise ValueError(f"{idx_path}: index shape {index.shape} does not match n={n} in {header_path}")
        self._src_off, self.src_lens, self._tgt_off, self.tgt_lens = (np.asarray(row) for row in index)
        self._src = self._map(Path(f"{self.prefix}.src.bin"), dtype, int(self.src_lens.sum()))
        self._tgt = self._map(Path(f"{self.prefix}.tgt.bin"), dtype, int(self.tgt_lens.sum()))

    @staticmethod
    def _map(path: Path, dtype: np.dtype, n_tokens: int) -> np.ndarray:
        size = path.stat().st_size if path.is_file() else None
        if size != n_tokens * dtype.itemsize:
            raise ValueError(
                f"{path}: {size} bytes, but the index needs {n_tokens} x {dtype.itemsize}: "
                "corrupt or truncated; re-run the encoding stage"
            )
        if n_tokens == 0:
            return np.zeros(0, dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    def __getstate__(self) -> dict:
        return {"prefix": self.prefix}  # re-map in the worker instead of pickling the mapped data

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["prefix"])  # type: ignore[misc]  # this class's own __init__, on unpickling

    def __len__(self) -> int:
        return len(self.src_lens)

    def src(self, i: int) -> np.ndarray:
        return self._src[self._src_off[i] : self._src_off[i] + self.src_lens[i]]

    def tgt(self, i: int) -> np.ndarray:
        return self._tgt[self._tgt_off[i] : self._tgt_off[i] + self.tgt_lens[i]]

    def check_tokenizer(self, tokenizer_path) -> None:
        """Raise if `tokenizer_path` is not the model these ids were encoded with."""
        digest = file_sha256(tokenizer_path)
        if digest != self.header["tokenizer_sha256"]:
            raise ValueError(
                f"{self.prefix}.json was encoded with a different tokenizer than {tokenizer_path} "
                f"(sha256 {self.header['tokenizer_sha256'][:12]}... vs {digest[:12]}...): re-encode"
            )
