"""Every config file composes; rows mean the same relative change at every scale; bad configs fail early."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from aiayn.config.composition import CONF_DIR, compose
from aiayn.config.resolve import ConfigError, prepare

GROUPS = ["data", "model", "scale", "row", "trainer", "decode", "logger"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group", GROUPS)
def test_every_file_in_every_group_composes(group: str) -> None:
    assert options(group), f"conf/{group} is empty"
    for name in options(group):
        overrides = [f"{group}={name}"] + (["data.path=/somewhere"] if (group, name) == ("data", "local") else [])
        cfg = prepare(compose(overrides))
        assert cfg.model.d_model >= 1


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_row_fits_every_shipped_scale(scale: str) -> None:
    for row in options("row"):
        cfg = prepare(compose([f"scale={scale}", f"row={row}"]))
        assert cfg.row.name == row


def test_tiny_is_the_plateau_setting_docs_measure() -> None:
    """What docs/departures.md#small-scales measured and the README's table comes from: base and big at the embedded
    default, the last fifth of training beginning at a validation (the plateau is read there)."""
    base, big = (prepare(compose(["scale=tiny", f"row={row}"])) for row in ("base", "big"))
    assert (base.data.max_words, base.data.valid_size, base.data.train_size) == (6, 1000, 10000)
    t = base.train
    assert (t.max_steps, t.batch_tokens, t.warmup_steps, t.lr_factor, t.val_every_steps) == (800, 256, 100, 0.3, 160)
    assert t.max_steps * 4 // 5 % t.val_every_steps == 0
    assert big.train.max_steps == 3 * t.max_steps  # the paper's 300k against 100k


def test_paper_scale_rows_are_the_papers_values() -> None:
    big = prepare(compose(["scale=paper", "row=big"]))
    assert (big.model.d_model, big.model.d_ff, big.model.n_heads, big.model.dropout) == (1024, 4096, 16, 0.3)
    assert big.train.max_steps == 300_000 and big.row.average_last == 20
    a1 = prepare(compose(["scale=paper", "row=A1"]))
    assert (a1.model.n_heads, a1.model.d_k, a1.model.d_v, a1.model.d_model) == (1, 512, 512, 512)


def test_a_row_is_a_relative_change_at_small_scales() -> None:
    base = prepare(compose(["scale=tiny", "row=base"])).model
    c4 = prepare(compose(["scale=tiny", "row=C4"])).model  # d_model 256 = half the paper's width
    assert c4.d_model == base.d_model // 2 and c4.d_k == base.d_k // 2
    b1 = prepare(compose(["scale=tiny", "row=B1"])).model  # d_k 16 = a quarter of base d_k; d_v unchanged
    assert b1.d_k == base.d_k // 4 and b1.d_v == base.d_v
    c1 = prepare(compose(["scale=tiny", "row=C1"])).model  # N = 2 of 6 layers
    assert c1.n_layers == round(base.n_layers * 2 / 6)
    d3 = prepare(compose(["scale=tiny", "row=D3"]))  # absolute values stay absolute
    assert d3.train.label_smoothing == 0.0


def test_snapshots_kept_follow_the_rows_averaging_unless_set() -> None:
    keep = {row: prepare(compose(["scale=tiny", f"row={row}"])).train.keep_last for row in ("base", "big", "C1")}
    assert keep == {"base": 5, "big": 20, "C1": 5}  # at tiny, Table 3's dev evaluation averages every row's last 5
    assert (
        prepare(compose(["scale=tiny", "row=C1", "train.keep_last=3", "row.dev_average_last=3"])).train.keep_last == 3
    )
    paper = {row: prepare(compose(["scale=paper", f"row={row}"])).train.keep_last for row in ("base", "C1")}
    assert paper == {"base": 5, "C1": 0}  # the paper's Table 3: the last checkpoint alone, so only last.ckpt
    tiny = prepare(compose(["scale=tiny", "row=C1"]))
    assert (tiny.row.dev_average_last, tiny.row.average_last) == (5, 0)


def test_every_rows_steps_are_a_multiple_of_the_checkpoint_cadence_at_every_scale() -> None:
    for scale in ("tiny", "small", "paper"):  # smoke is too small for some rows (a head size below 1)
        for row in options("row"):
            t = prepare(compose([f"scale={scale}", f"row={row}"])).train
            assert not t.ckpt_every_steps or t.max_steps % t.ckpt_every_steps == 0, (scale, row)


def test_a_row_that_does_not_fit_names_the_row_and_the_scale() -> None:
    with pytest.raises(ConfigError, match=r"row 'A4' does not fit scale 'tiny'.*d_k"):
        prepare(compose(["row=A4", "model.d_k=2"]))


def test_misspelt_key_fails_at_compose_time() -> None:
    with pytest.raises(ConfigCompositionException, match="d_modle"):
        compose(["model.d_modle=3"])


def test_wrong_type_fails_at_compose_time() -> None:
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose(["model.d_model=wide"])


def test_missing_row_file_is_refused() -> None:
    with pytest.raises(ConfigCompositionException, match="row"):
        compose(["row=Z9"])


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.d_ff=-1", "model.d_ff"),
        ("model.pos_encoding=relative", "model.pos_encoding"),
        ("model.norm_position=middle", "model.norm_position"),
        ("model.attention_dropout=1.0", "model.attention_dropout"),
        ("model.pos_encoding=rotary model.d_k=7", "model.d_k"),
        ("train.grad_clip=-1", "train.grad_clip"),
        ("train.adam_beta2=1.0", "train.adam_beta2"),
        ("model.dropout=1.5", "model.dropout"),
        ("train.label_smoothing=-0.1", "train.label_smoothing"),
        ("train.keep_last=2", "train.keep_last"),
        ("row=C1 train.keep_last=3", "row.dev_average_last=5"),  # C1 at tiny keeps too few for its dev average
        ("trainer.threads=0", "trainer.threads"),
        ("trainer.cpu_isa=sse4", "trainer.cpu_isa"),
        ("train.keep_last=-1", "train.keep_last"),
        ("train.max_steps=601", "train.ckpt_every_steps"),
        ("train.ckpt_every_minutes=5", "train.ckpt_every_minutes"),  # beside the scale's step cadence: one only
        ("train.max_tokens=999999", "train.max_tokens=999999 exceeds train.batch_tokens"),
        ("train.batch_budget=words", "train.batch_budget"),
        ("data.max_words=3", "data.max_words"),
        ("data.lexicon_scale=0", "data.lexicon_scale"),
        ("data.form=lc.tok", "data.form"),
        ("data.form=lc.norm.tok", "data.form=lc.norm.tok: only data=multi30k"),
        ("decode.strategy=sampling", "decode.strategy"),
        ("decode.precision=fp8", "decode.precision"),
        ("decode.batch_tokens=0", "decode.batch_tokens"),
        ("decode.bootstrap=-1", "decode.bootstrap"),
        ("model.max_positions=0", "model.max_positions"),
        ("model.qkv_init_gain=0", "model.qkv_init_gain"),
        ("data.name=wmt16", "data.name"),
        ("logger.backend=tensorboard", "logger.backend"),
    ],
)
def test_values_that_cannot_run_are_refused_with_their_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        prepare(compose(override.split()))


def test_prepared_config_is_the_typed_tree_resolved_and_read_only() -> None:
    """prepare() builds the schema's dataclasses once, the row applied and interpolations resolved: every group a
    component takes is its schema's type, and none can be changed after the check (a changed copy can)."""
    import dataclasses

    from aiayn.config.schema import Config, DecodeConfig, RowConfig, TrainConfig
    from aiayn.model.config import ModelConfig
    from aiayn.run.folders import RunSpec

    cfg = prepare(compose(["row=A2", "seed=7", "paths.results=${paths.runs}/out"]))
    assert RunSpec.of(cfg).run_dir == Path("runs") / "A2" / "seed7"
    assert isinstance(cfg, Config) and isinstance(cfg.row, RowConfig) and isinstance(cfg.decode, DecodeConfig)
    assert isinstance(cfg.model, ModelConfig) and isinstance(cfg.train, TrainConfig)
    assert cfg.paths.results == "runs/out"
    for group, key in ((cfg, "seed"), (cfg.model, "d_model"), (cfg.train, "lr_factor"), (cfg.row.model, "d_ff")):
        with pytest.raises(dataclasses.FrozenInstanceError, match="read-only"):
            setattr(group, key, 3)
    assert dataclasses.replace(cfg.decode, beam_size=8).beam_size == 8 and cfg.decode.beam_size == 4


def test_credential_overrides_are_refused_before_hydra_saves_them() -> None:
    from aiayn.config.cli import refuse_secret_overrides

    refuse_secret_overrides(["row=A1", "train.max_tokens=512", "decode.batch_tokens=9"])  # not credentials
    for arg in ("+logger.api_key=abc123", "++wandb.token=x", "+aws.secret_access_key=y"):
        with pytest.raises(SystemExit, match="credential"):
            refuse_secret_overrides([arg])


def test_the_model_refuses_what_its_marks_refuse_when_built_from_python() -> None:
    """aiayn.marks.check_values is the one check of sets and ranges: the model runs it on a config built by hand."""
    from aiayn.model.config import ModelConfig, check

    for bad, message in (
        ({"d_model": 7.5}, "model.d_model=7.5 must be an integer"),
        ({"n_heads": 0}, "model.n_heads=0 must be >= 1"),
        ({"dropout": 1.0}, r"model.dropout=1.0 must be in \[0, 1\)"),
        ({"qkv_init_gain": 0.0}, "model.qkv_init_gain=0.0 must be > 0"),
        ({"activation": "swish"}, "model.activation='swish' is not one of"),
    ):
        with pytest.raises(ValueError, match=message):
            check(ModelConfig(**bad))
    with pytest.raises(ValueError, match="vocab_size=0 must be a positive integer"):
        check(ModelConfig(), vocab_size=0)


def test_integer_fields_are_read_from_their_type_not_their_default() -> None:
    """A field typed `Optional[int]` with a None default (train.keep_last, decode.compact_every) refuses a float
    too, and a float field whose default is written as an int does not demand an integer."""
    import dataclasses

    from aiayn.config.schema import DecodeConfig, TrainConfig
    from aiayn.marks import check_values, mark

    for schema, key in ((TrainConfig, "keep_last"), (DecodeConfig, "compact_every")):
        values = dataclasses.asdict(schema())
        check_values({**values, key: 3}, schema)
        with pytest.raises(ValueError, match=f"{key}=2.5 must be an integer"):
            check_values({**values, key: 2.5}, schema, where="x.")

    @dataclasses.dataclass
    class Rate:
        value: float = mark(1, positive=True)

    check_values({"value": 0.5}, Rate)


def test_which_overrides_name_a_variant() -> None:
    """The row, scale, data, hardware, logging, paths and seed say what a run is; a key of a row's own metadata
    (row.average_last) or of model, train or decode makes a variant of it."""
    from aiayn.config.composition import is_identity

    identity = ["row=A1", "seed=2", "scale=tiny", "data.max_words=8", "hydra/launcher=basic", "+logger.tags=[x]"]
    assert all(is_identity(o) for o in identity)
    assert not any(is_identity(o) for o in ["row.average_last=0", "train.lr_factor=2", "+model.dropout=0.2"])


def test_the_m30k_tiny_scale_is_wu_et_als_recipe() -> None:
    """scale=m30k_tiny (docs/departures.md#m30k-tiny): fairseq's transformer_tiny, Adam's schedule peaking at their
    --lr 0.005 (after 800 warmup updates, theirs 2,000: a departure chosen on the dev set), on the literature's
    tokenised Multi30k."""
    from aiayn.train.schedule import inverse_sqrt_lr

    cfg = prepare(compose(["data=multi30k_tok", "scale=m30k_tiny"]))
    m, t = cfg.model, cfg.train
    assert (m.n_layers, m.d_model, m.d_ff, m.n_heads, m.d_k, m.dropout) == (4, 128, 256, 4, 32, 0.3)
    assert (m.norm_position, m.activation, m.share_embeddings) == ("post", "relu", "all")
    assert (t.max_steps, t.batch_tokens, t.warmup_steps, t.grad_clip, t.label_smoothing) == (8000, 8192, 800, 25, 0.1)
    assert inverse_sqrt_lr(800, 128, 800, t.lr_factor) == pytest.approx(0.005, rel=1e-3)
    assert (cfg.data.name, cfg.data.form, cfg.data.vocab_size, cfg.decode.beam_size) == (
        "multi30k",
        "lc.norm.tok",
        10000,
        5,
    )


def test_a_run_config_is_read_back_typed_as_this_version_reads_it(tmp_path: Path) -> None:
    """config.yaml as the train stage writes it reads back as the same Config; a group or key this version no
    longer has (an older run's `aggregate` block) is dropped, one it lacks takes its default; a value of the wrong
    type is refused naming the file and the key."""
    import dataclasses

    import yaml

    from aiayn.config.keys import recorded_config
    from aiayn.config.schema import Config

    cfg = prepare(compose(["row=A2", "seed=3", "train.lr_factor=2"]))
    written = dataclasses.asdict(cfg)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(written))
    assert recorded_config(path) == cfg
    older = {k: v for k, v in written.items() if k != "tables"} | {"aggregate": {"rows": None, "alpha": 0.05}}
    older["model"] = {**older["model"], "retired_switch": True}
    path.write_text(yaml.safe_dump(older))
    back = recorded_config(path)
    assert isinstance(back, Config) and back.model == cfg.model and back.tables == Config().tables
    path.write_text(yaml.safe_dump({**written, "train": {**written["train"], "max_steps": "many"}}))
    with pytest.raises(ConfigError, match=r"config\.yaml: train\.max_steps: Value 'many'"):
        recorded_config(path)
