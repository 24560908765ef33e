"""Joint source+target subword vocabulary with sentencepiece (section 5.1: "shared source-target vocabulary")."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from aiayn.run import folders

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def train_tokenizer(
    text_files: list[Path],
    model_prefix: Path,
    vocab_size: int,
    model_type: str = "bpe",
    sample_size: int | None = None,
    num_threads: int = 2,
    character_coverage: float = 1.0,
    seed: int = 0,
) -> Path:
    """Train one subword model on all `text_files` (both languages); returns `{model_prefix}.model`.

    Deterministic for the same inputs and seed; `sample_size` caps the sentences used (sampled, seeded).
    """
    # Departure: see docs/departures.md#sentencepiece-bpe (BPE learned on raw text, not on Moses-tokenized text)
    files = [Path(f) for f in text_files]
    for f in files:
        if not f.is_file() or f.stat().st_size == 0:
            raise FileNotFoundError(f"tokenizer training file missing or empty: {f}")
    model_prefix = Path(model_prefix)
    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    # Train into a temp folder beside the output, then move the results into place atomically.
    tmp_dir = Path(tempfile.mkdtemp(dir=model_prefix.parent, prefix=f".{model_prefix.name}."))
    try:
        inputs = _sample_lines(files, sample_size, seed, tmp_dir / "sample.txt") if sample_size else files
        spm.SentencePieceTrainer.train(
            input=[str(f) for f in inputs],
            model_prefix=str(tmp_dir / folders.TOKENIZER_PREFIX),
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            num_threads=num_threads,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            minloglevel=2,
        )
        # The model records its training paths; temp or output names would make equal models differ byte-wise.
        proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # generated protobuf
        proto.ParseFromString((tmp_dir / folders.TOKENIZER).read_bytes())
        proto.trainer_spec.ClearField("model_prefix")
        del proto.trainer_spec.input[:]
        proto.trainer_spec.input.extend(f.name for f in files)
        (tmp_dir / folders.TOKENIZER).write_bytes(proto.SerializeToString(deterministic=True))
        for ext in ("model", "vocab"):
            os.replace(tmp_dir / f"{folders.TOKENIZER_PREFIX}.{ext}", f"{model_prefix}.{ext}")
    except RuntimeError as e:
        if "Vocabulary size" in str(e):
            raise ValueError(
                f"vocab_size={vocab_size} is too large for the corpus {[str(f) for f in files]}: "
                f"lower it (sentencepiece: {e})"
            ) from e
        raise
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return Path(f"{model_prefix}.model")


def _sample_lines(files: list[Path], sample_size: int, seed: int, out: Path) -> list[Path]:
    """Seeded uniform sample of lines over all files, streamed to `out`.

    We sample ourselves: sentencepiece's own sampler seeds a per-thread RNG once per process, so its
    `input_sentence_size` sampling ignores a seed set later in the same process.
    """
    counts = []
    for f in files:
        with open(f, "rb") as fh:
            counts.append(sum(1 for _ in fh))
    total = sum(counts)
    if sample_size >= total:
        return files
    keep = np.zeros(total, dtype=bool)
    keep[np.random.default_rng(seed).choice(total, size=sample_size, replace=False)] = True
    i = 0
    with open(out, "wb") as dst:
        for f in files:
            with open(f, "rb") as fh:
                for line in fh:
                    if keep[i]:
                        dst.write(line if line.endswith(b"\n") else line + b"\n")
                    i += 1
    return [out]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Tokenizer:
    """Encode/decode with a trained sentencepiece model; picklable (carries the serialized model, not the path)."""

    def __init__(self, model_path: Path, num_threads: int = 2):
        model_path = Path(model_path)
        if not model_path.is_file():
            raise FileNotFoundError(f"tokenizer model not found: {model_path}")
        self._load(model_path.read_bytes(), num_threads)

    def _load(self, proto: bytes, num_threads: int) -> None:
        self._proto, self.num_threads = proto, num_threads
        self._sp = spm.SentencePieceProcessor(model_proto=proto)
        self.sha256 = hashlib.sha256(proto).hexdigest()
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(f"tokenizer special ids (pad, unk, bos, eos) are {ids}, expected (0, 1, 2, 3)")

    def __getstate__(self) -> dict:
        return {"proto": self._proto, "num_threads": self.num_threads}

    def __setstate__(self, state: dict) -> None:
        self._load(state["proto"], state["num_threads"])

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def piece(self, i: int) -> str:
        return self._sp.id_to_piece(i)

    def encode(self, lines: list[str]) -> list[list[int]]:
        """Subword ids of each line, without BOS/EOS (callers add them where the model needs them)."""
        return self._sp.encode(lines, out_type=int, num_threads=self.num_threads)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence: stops at the first EOS, drops PAD and BOS."""
        clean = []
        for seq in ids:
            seq = [int(i) for i in seq]
            if EOS_ID in seq:
                seq = seq[: seq.index(EOS_ID)]
            clean.append([i for i in seq if i not in (PAD_ID, BOS_ID)])
        return self._sp.decode(clean)
