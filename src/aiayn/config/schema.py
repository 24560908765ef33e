"""Typed schemas for every config group (Hydra structured configs).

The dataclass defaults are the paper's values (base model, section 3 and 5); `conf/` holds every other value,
once. A misspelt key fails when the config is composed, before any work starts.

Fields are marked once (aiayn.marks), and everything else derives from the marks: `relative(...)` sizes and step
counts a row (conf/row/) gives in the paper's units, so that "d_model: 256" means half the scale's base width at
every scale; `choice(...)` values from a fixed set; `observed(...)` how a run is watched; `averaging(...)` how it is
checkpointed. The model's own config is aiayn.model.config's. Every other key a row sets is absolute.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from aiayn.marks import Sealable, averaging, choice, mark, observed, relative
from aiayn.model.config import ModelConfig

# A config key that names a credential (refused in configs and overrides, dropped from what is logged); whole
# name segments: `hf_token` and `api_key` are secrets, `max_tokens` and `batch_tokens` are not.
SECRET_KEY = re.compile(
    r"(^|[_-])(api_?key|(secret|access|private)_?key|token|secret|password|passwd|credentials?)$", re.IGNORECASE
)


class ConfigError(ValueError):
    """A config that cannot run; the message names the key (and the row or scale) and the reason."""


def refuse_credentials(tree: dict[Any, Any]) -> None:
    """Refuse a config tree (plain dicts) holding a credential-like key, e.g. `+logger.api_key=...`: the config is
    saved with every run. The message names the key, never its value."""

    def keys(node: Any, prefix: str = "") -> list[str]:
        if not isinstance(node, dict):
            return []
        return [f"{prefix}{k}" for k in node if SECRET_KEY.search(str(k))] + [
            found for k, v in node.items() for found in keys(v, f"{prefix}{k}.")
        ]

    if found := keys(tree):
        raise ConfigError(
            f"config key {found[0]} looks like a credential; credentials come from the environment "
            f"(WANDB_API_KEY) or `wandb login`, never the config, which is saved with every run"
        )


def row_file(name: str) -> str:
    """Where row `name` lives, for messages (conf/row/<name>.yaml)."""
    return f"conf/row/{name}.yaml"


def averaged(row: Any) -> int:
    """The most checkpoints a row's evaluations average (Table 2's test, Table 3's dev): the snapshots a run must
    keep; 0 when each takes the last checkpoint alone."""
    most = max(int(row.average_last), int(row.dev_average_last))
    return most if most > 1 else 0


# Allowed values spelled once: the fields below offer them (the first is the default), and the modules that take them
# (aiayn.data.clean, aiayn.data.batching, aiayn.decode.search) check them against these.
# data.name: the built-in corpus, a local folder, or a remote corpus of aiayn.data.sources.catalog (its names)
DATA_SOURCES = ("synthetic", "local", "multi30k", "wmt14_en_de", "wmt14_en_fr")
NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")  # Unicode normalisation of every sentence (unicodedata)
# what a training batch's sentences share most: the source's length (the default, fairseq's order), or the longer side's
BATCH_ORDERS = ("source", "longer")
LR_SCHEDULES = ("inverse_sqrt", "linear")  # train.lr_schedule (aiayn.train.schedule), the paper's first
# what max_tokens counts: real target tokens alone (the default), or padded positions or real tokens per side
BATCH_BUDGETS = ("target", "padded", "real")
DECODE_STRATEGIES = ("beam", "greedy")
LENGTH_NORMS = ("gnmt", "power")  # aiayn.decode.beam.length_penalty
VERDICT_COLUMNS = ("bleu", "ppl")  # Table 3's result columns (dev BLEU, dev PPL), each a claim per row
PLANNING_POOLS = ("median", "pooled")  # how Table 3's plan pools the rows' spreads (aiayn.verdicts.significance)


@dataclass
class CleanConfig(Sealable):
    """Training-pair filters of the fetch stage; valid/test sets are never filtered."""

    min_len: int = 1
    max_len: int = 250  # words, whitespace-split
    max_ratio: float = 9.0  # longer side / shorter side, in words (Moses clean-corpus-n's default)
    normalize: str = choice(*NORMAL_FORMS)


@dataclass
class DownloadConfig(Sealable):
    """How hard a download of the WMT archives keeps trying (aiayn.data.download.RetryPolicy): a transfer that keeps
    advancing is never abandoned; `retries` counts attempts in a row that added nothing."""

    retries: int = 8
    stall_s: float = 60.0  # no byte for this long ends an attempt (the next resumes)
    backoff_s: float = 1.0  # first wait, doubled per failure without progress, jittered
    backoff_max_s: float = 300.0


@dataclass
class DataConfig(Sealable):
    name: str = choice(*DATA_SOURCES)
    src_lang: str = "en"
    tgt_lang: str = "de"
    # synthetic: generator seed and split sizes (pairs); also seeds holdout and subword sampling
    seed: int = 1234
    train_size: int = mark(20000, at_least=1)
    valid_size: int = mark(1000, at_least=1)
    test_size: int = mark(1000, at_least=1)
    lexicon_scale: float = mark(1.0, positive=True)  # synthetic lexicon size; 1.0 is about 3000 lemmas
    max_words: int = 40  # synthetic: longest sentence (words, either side); the shortest is 4
    # multi30k: which published files, the raw captions or the literature's lowercased, punctuation-normalised and
    # Moses-tokenised ones (data/task1/tok/*.lc.norm.tok.*), which its BLEU is scored on
    form: str = choice("raw", "lc.norm.tok")
    # local: a folder of parallel files {prefix}.{lang}
    path: Optional[str] = None
    train_prefix: str = "train"
    valid_prefix: str = "val"
    test_prefix: Optional[str] = None  # null: hold out a deterministic test split of train (data.holdout_size)
    holdout_size: int = 1000
    # remote corpora (multi30k, wmt14_*): download cache (survives reruns) and an optional mirror (folder or URL)
    cache_dir: str = "~/.cache/aiayn"
    mirror: Optional[str] = None
    download: DownloadConfig = field(default_factory=DownloadConfig)
    max_train_pairs: Optional[int] = None
    clean: CleanConfig = field(default_factory=CleanConfig)
    # joint subword vocabulary (section 5.1: BPE, ~37000 for EN-DE; word-pieces, 32000 for EN-FR)
    vocab_size: int = mark(37000, at_least=1)
    model_type: str = choice("bpe", "unigram", "char", "word")  # sentencepiece's
    bpe_sample: int = 2_000_000  # sentences sampled to train the subword model
    character_coverage: float = 1.0


@dataclass
class TrainConfig(Sealable):
    """Section 5: optimizer, schedule, batching, regularisation; plus checkpointing and logging cadence."""

    max_steps: int = relative(100_000)
    batch_tokens: int = relative(25_000)  # per optimizer step, source and target each (section 5.1), all devices
    # together
    # most tokens per micro-batch on one device; accumulation = ceil(batch_tokens / (max_tokens * devices)), then
    # micro-batches of batch_tokens / (devices * accumulation) (aiayn.stages.train.batching)
    max_tokens: int = mark(4096, at_least=1)
    # 0 = off; K: sentence lengths rounded up to a multiple of K for batching and padding, so batches take few
    # distinct shapes (compiled and CUDA graphs reused; aiayn.data.batching). The same model and loss on other
    # batches, with more padding.
    length_bucket: int = mark(0, at_least=0, note=" (0: lengths as they are)")
    # Which length a training batch's sentences share (aiayn.data.batching): "source" first (the default, as fairseq
    # orders them: target lengths vary within a batch) or the "longer" side first; and what the budget counts: real
    # "target" tokens alone (the default: the tokens the loss averages over), "padded" positions (sentences x
    # longest, per side) or "real" tokens (per side). Departure: see docs/departures.md#token-budget
    batch_order: str = choice(*BATCH_ORDERS)
    batch_budget: str = choice(*BATCH_BUDGETS)
    lr_factor: float = mark(1.0, positive=True)  # multiplies Eq. 3; 1.0 is the paper
    warmup_steps: int = relative(4000)
    # "inverse_sqrt": Eq. 3 (the paper). "linear": Eq. 3's warmup to the same peak, then a linear decay to zero at
    # max_steps, a schedule set by the run's budget (aiayn.train.schedule; docs/departures.md#budgeted-schedule)
    lr_schedule: str = choice(*LR_SCHEDULES)
    adam_beta1: float = mark(0.9, unit=True)
    adam_beta2: float = mark(0.98, unit=True)
    adam_eps: float = mark(1e-9, positive=True)
    label_smoothing: float = mark(0.1, unit=True)  # eps_ls, section 5.4
    grad_clip: float = mark(0.0, at_least=0, note=" (0: no clipping)")  # as in the paper
    val_every_steps: int = observed(1000, at_least=1)
    # fairseq's --patience: stop once this many validations in a row found no lower dev loss (Lightning's
    # EarlyStopping on val/loss); max_steps still bounds the run. Which step a run stops at decides its weights, so
    # a resumed run must share it. The paper trains a fixed number of steps: docs/departures.md#m30k-tiny
    patience: int = mark(0, at_least=0, note=" (0: off, train to max_steps)")
    log_every_steps: int = observed(50, at_least=1)  # training metrics to the curve and wandb
    # A progress line in the log at most every so many seconds (at a logging step), and one summary line at the end;
    # 0: at every logging step
    progress_every_s: float = observed(30.0, at_least=0)
    ckpt_every_steps: int = averaging(0)  # 0 = off; a checkpoint every K steps
    ckpt_every_minutes: float = averaging(10.0)  # 0 = off; the paper's 10-minute interval (section 6.1)
    # Averaging snapshots every K steps when the resume checkpoint's cadence is coarser; 0: the same cadence.
    # With a step cadence, only the last keep_last are ever written.
    snapshot_every_steps: int = averaging(0, at_least=0, note=" (0: at the checkpoint cadence)")
    # Weights-only snapshots kept for averaging, written at the checkpoint cadence beside the full last.ckpt
    # that resumes; null: as many as the row's evaluations average (the larger of row.average_last and
    # row.dev_average_last; none when they average nothing).
    keep_last: Optional[int] = averaging(None, at_least=0, note=" (null: what the row's evaluations average)")
    compile: bool = observed(False)  # torch.compile the model (GPU runs): the same function, faster
    # 0 = off; K: the output projection and the loss K target tokens at a time, the whole (N, V) logits never in
    # memory (aiayn.train.chunked_loss): the same function within float rounding, for large vocabularies and batches
    loss_chunk_tokens: int = observed(0, at_least=0, note=" (0: the whole logits at once)")
    # With loss_chunk_tokens: the projection and loss over the non-pad target tokens only (pad targets add nothing
    # to either), in fewer passes over each chunk's logits (aiayn.train.chunked_loss): the same function within float
    # rounding; 1.2x the m30k_tiny step on CPU (bench/train_step.py)
    loss_skip_pad: bool = observed(False)
    # Under trainer.deterministic, torch fills every new uninitialised tensor with NaN (or the integer maximum) so
    # that a read of one is reproducible (torch.utils.deterministic.fill_uninitialized_memory, on by default there);
    # false skips the fills: the same numbers wherever no uninitialised memory is read, 1.1x the m30k_tiny step on CPU
    deterministic_fill: bool = observed(True)
    fused_adam: bool = observed(True)  # torch's fused Adam kernel where the device supports it (CUDA and CPU)
    num_workers: int = observed(0)
    resume: bool = observed(True)  # continue from checkpoints/last.ckpt when its config matches

    def __post_init__(self) -> None:
        """What the values must say together (each alone: the marks). Runs when a TrainConfig is built from a
        config (aiayn.config.resolve.prepare, before any work), not on Hydra's own composition."""
        if self.lr_schedule == "linear" and self.max_steps <= self.warmup_steps:
            raise ValueError(
                f"train.lr_schedule=linear decays to zero at train.max_steps={self.max_steps}, which must exceed "
                f"train.warmup_steps={self.warmup_steps}"
            )
        if self.max_tokens > self.batch_tokens:
            raise ValueError(f"train.max_tokens={self.max_tokens} exceeds train.batch_tokens={self.batch_tokens}")
        if self.ckpt_every_steps and self.ckpt_every_minutes:
            raise ValueError("set one of train.ckpt_every_steps and train.ckpt_every_minutes, not both (0 = off)")
        for key, unless in (
            ("ckpt_every_steps", "never be checkpointed, so neither evaluated nor averaged"),
            ("snapshot_every_steps", "not be averaged"),
        ):
            every = getattr(self, key)
            if every and self.max_steps % every:
                raise ValueError(
                    f"train.max_steps={self.max_steps} is not a multiple of train.{key}={every}: the final weights "
                    f"would {unless}"
                )


@dataclass
class TrainerConfig(Sealable):
    accelerator: str = "cpu"
    devices: Any = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    deterministic: bool = True
    enable_progress_bar: bool = True
    peak_flops: Optional[float] = None  # per device, for train/mfu; null: looked up from the device name
    # A CPU run's float path (aiayn.run.floatpath): intra-op threads (null: torch's default, or the parallel launcher's
    # share of the cores) and the x86-64 kernels of PyTorch and MKL (null: the machine's widest). conf/trainer/cpu.yaml
    # pins 1 thread and avx2, so that the default's numbers are the same on every Intel x86-64 machine with AVX2.
    threads: Optional[int] = mark(None, at_least=1)
    cpu_isa: Optional[str] = choice(None, "avx2", "avx512")


@dataclass
class DecodeConfig(Sealable):
    """Section 6.1: beam 4, length penalty alpha 0.6, max output length = input length + 50."""

    strategy: str = choice(*DECODE_STRATEGIES)
    beam_size: int = mark(4, at_least=1)
    length_penalty: float = mark(0.6, at_least=0)
    # What length_penalty (alpha) divides a hypothesis' log-probability by: "gnmt", ((5 + |Y|) / 6)^alpha, the
    # paper's; "power", |Y|^alpha, fairseq's --lenpen (1.0 by default there), transformers' and CTranslate2's.
    length_norm: str = choice(*LENGTH_NORMS)
    max_len_b: int = mark(50, at_least=0)
    batch_tokens: int = observed(4096, at_least=1)  # per decoding batch
    # Sentences that stopped leave the batch every compact_every steps, the only steps where the host waits for
    # the device (aiayn.decode.beam). null: by device (aiayn.decode.search.default_compact_every).
    compact_every: Optional[int] = observed(None, at_least=1, note=" (null: by device)")
    # Arithmetic of decoding and dev perplexity: "32-true", "bf16-mixed" or "16-mixed" (autocast), as Lightning
    # names them. null: the run's trainer.precision, so a run trained in bf16 on a GPU is decoded in bf16.
    precision: Optional[str] = choice(None, "32-true", "bf16-mixed", "16-mixed")
    bootstrap: int = mark(
        1000, at_least=0, note=" (0: no interval)"
    )  # sacreBLEU bootstrap resamples for the test-set CI
    samples: int = observed(20)  # sample translations logged to wandb


@dataclass
class LoggerConfig(Sealable):
    backend: str = choice("wandb", "none")
    project: str = "aiayn"
    entity: Optional[str] = None
    # auto (online when logged in, else offline) | online | offline | disabled; not a choice: a misconfigured wandb
    # is skipped with a warning, never stops a run (aiayn.run.tracking)
    mode: str = "auto"
    dir: str = "."  # wandb writes <dir>/wandb/
    tags: List[str] = field(default_factory=list)
    init_timeout: float = 60.0  # seconds wandb may take to reach its server before the run goes on without it
    # The train run's checkpoint artifact refers to runs/.../checkpoints by path and checksum (nothing is copied);
    # true uploads the weights into the artifact instead.
    upload_checkpoints: bool = False


def patch_of(schema: type) -> type:
    """The row patch of a group schema: the same fields, each optional, None meaning "as the scale has it"."""
    hints = typing.get_type_hints(schema)
    specs = [(f.name, Optional[hints[f.name]], field(default=None)) for f in dataclasses.fields(schema)]
    patch = dataclasses.make_dataclass(schema.__name__.replace("Config", "Patch"), specs, bases=(Sealable,))
    patch.__module__ = __name__  # this module holds it by that name, so a config holding it pickles
    return patch


# The groups a row may change. Data is not among them: every row trains on the one corpus and tokenizer that the
# fetch and bpe stages make, so a row's data.* would be silently ignored.
ModelPatch, TrainPatch, DecodePatch = patch_of(ModelConfig), patch_of(TrainConfig), patch_of(DecodeConfig)
ROW_GROUPS = {"model": ModelConfig, "train": TrainConfig, "decode": DecodeConfig}
TABLES = ("table2", "table3")


@dataclass
class PaperRef(Sealable):
    """Which of the paper's published rows a row reproduces (aiayn/report/paper_tables.yaml); null: none."""

    table3: Optional[str] = None  # its Table 3 row by our name: base, A1 .. E, big
    table2: Optional[str] = None  # its Table 2 system, e.g. "Transformer (base model)"


@dataclass
class RowConfig(Sealable):
    """One row of Table 3 (or a system of Table 2): metadata, and a typed patch over model, train and decode.

    Keys marked `relative` in the schemas above (sizes, max_steps, warmup_steps, batch_tokens) are given in the
    paper's units and scaled: at any scale a value v becomes scale_value * v / paper_value, so "model.d_model: 256"
    means half the scale's base width. Every other key is absolute. Unset keys leave the scale's value.
    """

    name: str = "base"  # the row file's name (conf/row/<name>.yaml) and its run folders' (runs/<name>/)
    description: str = "base model"
    # Which tables show the row. table2: evaluate also decodes the test set (newstest2014); Table 3 rows are
    # compared on the dev set only (newstest2013), as in the paper.
    tables: List[str] = field(default_factory=lambda: ["table3"], metadata={"choices": TABLES})
    paper: PaperRef = field(default_factory=PaperRef)
    # Checkpoints averaged for Table 2's test evaluation (section 6.1: base 5, big 20); 0 = the last checkpoint.
    average_last: int = 0
    # Checkpoints averaged for Table 3's dev evaluation, every row alike; 0 or 1 = the last checkpoint alone, the
    # paper's (section 6.2: "no checkpoint averaging"). The tiny scale averages 5.
    # Departure: see docs/departures.md#dev-averaging
    dev_average_last: int = 0
    # For a row the paper does not have: the smallest ΔBLEU from base worth detecting, in BLEU at the paper's scale
    # (converted like the paper's differences); its seeds are planned for it. null: the margin (design.margin_bleu).
    effect_of_interest: Optional[float] = None
    # Dataclasses made by patch_of: types for OmegaConf (it checks a row's keys and values against them), not for mypy.
    model: ModelPatch = field(default_factory=ModelPatch)  # type: ignore[valid-type]
    train: TrainPatch = field(default_factory=TrainPatch)  # type: ignore[valid-type]
    decode: DecodePatch = field(default_factory=DecodePatch)  # type: ignore[valid-type]


@dataclass
class ScaleConfig(Sealable):
    name: str = "paper"


@dataclass
class PathsConfig(Sealable):
    """The roots; a run's own folders under them are aiayn.run.folders's (runs/{row}/{variant}/seed{seed}, ...)."""

    raw: str = "data/raw"
    bpe: str = "data/bpe"
    runs: str = "runs"  # the train stage's
    evals: str = "evals"  # the evaluate stage's
    tuning: str = "decode_tuning"  # pipeline/tune_decode.py's (outside DVC's outputs)
    results: str = "results"
    kept: str = "kept"  # finished seeds committed to the repository (aiayn.run.kept)


@dataclass
class DesignConfig(Sealable):
    """How Table 3 decides, declared before the runs: params.yaml's `design` keys, the one list of them
    (aiayn.verdicts.significance.Design takes them with the run's setting and checks them; docs/verdicts.md)."""

    alpha: float = 0.05  # the family-wise error rate of Table 3's verdicts together
    power: float = 0.8  # of each row's decision at its planned seeds
    margin_bleu: float = 0.5  # delta: differences within it are "no difference", in BLEU at the paper's scale
    # The paper's BLEU -> this setting's; null: 1 at the paper's setting (scale paper, wmt14_en_de), else our base's
    # dev BLEU over the pilot seeds / the paper's 25.8.
    bleu_scale: Optional[float] = None
    # delta for dev PPL: a row's PPL within (1 +- margin_ppl) x base's at the paper's scale is "no difference"
    margin_ppl: float = 0.02
    # The paper's log PPL differences -> this setting's; null: 1 at the paper's setting, else our base's mean log PPL
    # over the pilot seeds / log 4.92 (the paper's base).
    ppl_scale: Optional[float] = None
    # The columns each row makes a claim on (one family over all of them): dev BLEU and dev PPL, as the paper reports
    columns: List[str] = field(default_factory=lambda: list(VERDICT_COLUMNS), metadata={"choices": VERDICT_COLUMNS})
    # How the plan pools the rows' spreads: median (of the variances: a few wide rows do not starve the others) or
    # pooled (the df-weighted mean: right when rows spread alike). docs/verdicts.md
    planning_pool: str = choice(*PLANNING_POOLS)
    max_seeds: int = 10  # the design's one extension gives a row at most this many seeds


DESIGN_KEYS = tuple(f.name for f in dataclasses.fields(DesignConfig))  # params.yaml's `design` keys
DesignPatch = patch_of(DesignConfig)


@dataclass
class ParamsConfig(Sealable):
    """params.yaml, the DVC pipeline's knobs, read through this one structured config (aiayn.config.params), so a
    misspelt key or a value of the wrong type is refused naming the file and the key. The pipeline's choices
    (null: conf/config.yaml's) are passed to every stage; the groups' non-null keys override conf/ for every row. A
    stage of your own that reads a new params.yaml key declares it here (an undeclared key is refused as misspelt)."""

    scale: Optional[str] = None  # conf/scale/
    data: Optional[str] = None  # conf/data/
    trainer: Optional[str] = None  # conf/trainer/
    launcher: Optional[str] = None  # conf/hydra/launcher/
    model: ModelPatch = field(default_factory=ModelPatch)  # type: ignore[valid-type]
    train: TrainPatch = field(default_factory=TrainPatch)  # type: ignore[valid-type]
    decode: DecodePatch = field(default_factory=DecodePatch)  # type: ignore[valid-type]
    design: DesignPatch = field(default_factory=DesignPatch)  # type: ignore[valid-type]
    rows: List[str] = field(default_factory=list)  # conf/row/ names, in table order
    seeds: List[int] = field(default_factory=list)  # every row's
    extra_seeds: Dict[str, List[int]] = field(
        default_factory=dict
    )  # row -> seeds besides `seeds` (aiayn.verdicts.extension)


@dataclass
class TablesConfig(Sealable):
    """Which runs the aggregate stage's tables show (null rows/seeds: read from `params_file`, the DVC pipeline's
    lists), and the device speed Table 2's training cost assumes."""

    rows: Optional[List[str]] = None
    seeds: Optional[List[int]] = None
    params_file: str = "params.yaml"
    sustained_flops_per_device: float = 9.5e12  # the paper's P100 figure (footnote of Table 2)


@dataclass
class Config(Sealable):
    seed: int = 1
    # The result-changing settings in which this run differs from its row at its scale, e.g. {"train.lr_factor": 2}
    # (aiayn.config.composition, filled by the entry points from the command line).
    variant: Dict[str, Any] = field(default_factory=dict)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    row: RowConfig = field(default_factory=RowConfig)
    scale: ScaleConfig = field(default_factory=ScaleConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    tables: TablesConfig = field(default_factory=TablesConfig)
    design: DesignConfig = field(default_factory=DesignConfig)  # how Table 3 decides: params.yaml's `design`

    def __post_init__(self) -> None:
        """What the groups must say together (each group's own values: the marks and the groups' __post_init__);
        runs when aiayn.config.resolve.prepare builds the run's config, before any work."""
        from aiayn.model.config import check as check_model

        check_model(self.model, where="model.")  # the model's values together (even sizes its positions pair)
        t, row = self.train, self.row
        for key in ("average_last", "dev_average_last"):
            given = getattr(row, key)
            if given > 1 and (t.keep_last or 0) < given:
                raise ConfigError(
                    f"train.keep_last={t.keep_last} keeps fewer checkpoints than row '{row.name}' averages "
                    f"(row.{key}={given})"
                )
        if self.data.name == "synthetic" and self.data.max_words < 4:
            raise ConfigError(
                f"data.max_words={self.data.max_words} must be >= 4 (the synthetic corpus's shortest sentence)"
            )
        if self.data.form != "raw" and self.data.name != "multi30k":
            raise ConfigError(
                f"data.form={self.data.form}: only data=multi30k is published in that form; use data.form=raw"
            )
