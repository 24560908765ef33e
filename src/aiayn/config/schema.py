"""Typed schemas for every config group (Hydra structured configs).

The dataclass defaults are the paper's values (base model, section 3 and 5); `conf/` holds every other value,
once. A misspelt key fails when the config is composed, before any work starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional


@dataclass
class CleanConfig:
    """Training-pair filters of the fetch stage; valid/test sets are never filtered."""

    min_len: int = 1
    max_len: int = 250  # words, whitespace-split
    max_ratio: float = 9.0  # longer side / shorter side, in words (Moses clean-corpus-n's default)
    normalize: str = "NFC"


@dataclass
class DataConfig:
    name: str = "synthetic"  # synthetic | local | wmt14_en_de | wmt14_en_fr
    src_lang: str = "en"
    tgt_lang: str = "de"
    # synthetic: generator seed and split sizes (pairs); also seeds holdout and subword sampling
    seed: int = 1234
    train_size: int = 20000
    valid_size: int = 1000
    test_size: int = 1000
    lexicon_scale: float = 1.0  # synthetic lexicon size; 1.0 is about 3000 lemmas
    max_words: int = 40  # synthetic: longest sentence (words, either side); the shortest is 4
    # local: a folder of parallel files {prefix}.{lang}
    path: Optional[str] = None
    train_prefix: str = "train"
    valid_prefix: str = "val"
    test_prefix: Optional[str] = None  # null: hold out a deterministic test split of train (data.holdout_size)
    holdout_size: int = 1000
    # remote corpora: download cache (survives reruns) and an optional mirror (folder or URL)
    cache_dir: str = "~/.cache/aiayn"
    mirror: Optional[str] = None
    max_train_pairs: Optional[int] = None
    clean: CleanConfig = field(default_factory=CleanConfig)
    # joint subword vocabulary (section 5.1: BPE, ~37000 for EN-DE; word-pieces, 32000 for EN-FR)
    vocab_size: int = 37000
    model_type: str = "bpe"
    bpe_sample: int = 2_000_000  # sentences sampled to train the subword model
    character_coverage: float = 1.0


@dataclass
class ModelConfig:
    """The paper's base model (Table 3, first row); rows and scales change it."""

    n_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    d_k: int = 64
    d_v: int = 64
    dropout: float = 0.1  # P_drop, section 5.4
    pos_encoding: str = "sinusoidal"  # sinusoidal | learned (Table 3 row E) | none
    max_positions: int = 1024  # table size of learned positions; sinusoids are computed to this length
    # Xavier gain of W_Q, W_K, W_V (the paper gives no init). Departure: see docs/departures.md#initialisation
    qkv_init_gain: float = 0.7071067811865476  # 1/sqrt(2), as nn.MultiheadAttention and fairseq


@dataclass
class TrainConfig:
    """Section 5: optimizer, schedule, batching, regularisation; plus checkpointing and logging cadence."""

    max_steps: int = 100_000
    batch_tokens: int = 25_000  # per optimizer step, source and target each (section 5.1), all devices together
    max_tokens: int = 4096  # per micro-batch on one device; accumulation = batch_tokens / (max_tokens * devices)
    lr_factor: float = 1.0  # multiplies Eq. 3; 1.0 is the paper
    warmup_steps: int = 4000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1  # eps_ls, section 5.4
    grad_clip: float = 0.0  # 0 = none, as in the paper
    val_every_steps: int = 1000
    log_every_steps: int = 50
    ckpt_every_steps: int = 0  # 0 = off; a checkpoint every K steps
    ckpt_every_minutes: float = 10.0  # 0 = off; the paper's 10-minute interval (section 6.1)
    # Averaging snapshots every K steps when the resume checkpoint's cadence is coarser; 0: the same cadence.
    # With a step cadence, only the last keep_last are ever written.
    snapshot_every_steps: int = 0
    # Weights-only snapshots kept for averaging, written at the checkpoint cadence beside the full last.ckpt
    # that resumes; null: as many as the row averages (row.average_last; none when it averages nothing).
    keep_last: Optional[int] = None
    compile: bool = False  # torch.compile the model (GPU runs)
    fused_adam: bool = True  # torch's fused Adam kernel where the device supports it (CUDA and CPU)
    num_workers: int = 0
    resume: bool = True  # continue from checkpoints/last.ckpt when its config matches


@dataclass
class TrainerConfig:
    accelerator: str = "cpu"
    devices: Any = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    deterministic: bool = True
    enable_progress_bar: bool = True
    peak_flops: Optional[float] = None  # per device, for train/mfu; null: looked up from the device name


@dataclass
class DecodeConfig:
    """Section 6.1: beam 4, length penalty alpha 0.6, max output length = input length + 50."""

    strategy: str = "beam"  # beam | greedy
    beam_size: int = 4
    length_penalty: float = 0.6
    max_len_b: int = 50
    batch_tokens: int = 4096
    bootstrap: int = 1000  # sacreBLEU bootstrap resamples for the test-set CI
    samples: int = 20  # sample translations logged to wandb


@dataclass
class LoggerConfig:
    backend: str = "wandb"  # wandb | none
    project: str = "aiayn"
    entity: Optional[str] = None
    mode: str = "auto"  # auto (online when logged in, else offline) | online | offline | disabled
    dir: str = "."  # wandb writes <dir>/wandb/
    tags: List[str] = field(default_factory=list)
    init_timeout: float = 60.0  # seconds wandb may take to reach its server before the run goes on without it


@dataclass
class RowConfig:
    """One row of Table 3 (or a model of Table 2) as a change to base, in the paper's units.

    Sizes are relative: at any scale a size becomes scale_base * (row_value / paper_base), so "d_model: 256"
    means half the scale's base width. None = unchanged from base.
    """

    name: str = "base"
    description: str = "base model"
    n_layers: Optional[int] = None
    d_model: Optional[int] = None
    d_ff: Optional[int] = None
    n_heads: Optional[int] = None
    d_k: Optional[int] = None
    d_v: Optional[int] = None
    dropout: Optional[float] = None
    label_smoothing: Optional[float] = None
    pos_encoding: Optional[str] = None
    train_steps: Optional[int] = None  # paper units (base: 100000)
    # Checkpoints averaged at evaluation (section 6.1); 0 = last checkpoint only.
    # Departure: see docs/departures.md#checkpoint-averaging-for-table3
    average_last: int = 0
    # A system of Table 2 (base, big): evaluate also decodes the test set (newstest2014). Table 3 rows are
    # compared on the dev set only (newstest2013), as in the paper.
    table2: bool = False


@dataclass
class ScaleConfig:
    name: str = "paper"


@dataclass
class PathsConfig:
    raw: str = "data/raw"
    bpe: str = "data/bpe"
    runs: str = "runs"
    results: str = "results"
    evals: str = "evals"
    run_dir: str = "${paths.runs}/${row.name}/seed${seed}"  # the train stage's folder for one run
    eval_dir: str = "${paths.evals}/${row.name}/seed${seed}"  # the evaluate stage's folder for one run
    tuning_dir: str = "decode_tuning/${row.name}/seed${seed}"  # pipeline/tune_decode.py's (outside DVC's outputs)


@dataclass
class AggregateConfig:
    """Which runs make the tables; null rows/seeds are read from `params_file`, the DVC pipeline's lists."""

    rows: Optional[List[str]] = None
    seeds: Optional[List[int]] = None
    params_file: str = "params.yaml"
    sustained_flops_per_device: float = 9.5e12  # the paper's P100 figure (footnote of Table 2)


@dataclass
class Config:
    seed: int = 1
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    row: RowConfig = field(default_factory=RowConfig)
    scale: ScaleConfig = field(default_factory=ScaleConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    aggregate: AggregateConfig = field(default_factory=AggregateConfig)
