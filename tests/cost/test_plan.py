"""`aiayn-plan`: counted FLOPs and device-hours of a configured pipeline, before anything runs."""

from __future__ import annotations

import math

import pytest
import yaml

from aiayn.cost.devices import load
from aiayn.cost.flops import forward_flops_per_token, peak_flops
from aiayn.cost.plan import apply_sets, duration, main, plan, speed
from aiayn.model.config import ModelConfig


@pytest.fixture(scope="module")
def params(repo_root):
    return yaml.safe_load((repo_root / "params.yaml").read_text())


def test_the_default_params_cost_minutes_of_cpu(params, tmp_path, capsys):
    result = plan(params, "CPU", tmp_path / "bpe")
    assert [r["row"] for r in result["records"]] == params["rows"] and all(r["seeds"] == 4 for r in result["records"])
    base = next(r for r in result["records"] if r["row"] == "base")
    assert base["steps"] == 800 and base["batch_tokens"] == 256
    assert 0.2 < result["hours"] < 2.0  # the embedded default: minutes on 2 cores (measured: ~29 min)
    assert result["wall_hours"] == pytest.approx(result["hours"] / 2)  # launcher=parallel: 2 seeds side by side
    assert main(["--params", "params.yaml"]) == 0 and "min of wall time" in capsys.readouterr().out
    assert main(["--params", str(tmp_path / "nowhere.yaml")]) == 2


def test_paper_scale_table3_on_an_h200_matches_the_measured_speed(params, tmp_path, capsys):
    paper = apply_sets(params, ["scale=paper", "data=wmt14_en_de", "trainer=gpu"])
    result = plan(paper, "H200", tmp_path / "bpe")
    base = next(r for r in result["records"] if r["row"] == "base")
    big = next(r for r in result["records"] if r["row"] == "big")
    # base: 100k steps x 25k + 25k tokens x ~190 MFLOP (3 x forward) = ~9.5e17 counted FLOPs
    assert base["train_flops"] == pytest.approx(9.5e17, rel=0.15) and big["steps"] == 300_000
    # Hours are counted FLOPs at the table's MFU of the device's peak (plus decoding): whatever was measured.
    table = load()["H200"]
    for record, size in ((base, "base"), (big, "big")):
        training = record["train_flops"] / (table[size]["mfu"] * peak_flops("H200", "bf16-mixed")) / 3600
        assert training <= record["hours_per_run"] <= training * 1.1
    assert result["hours"] == pytest.approx(sum(r["hours"] for r in result["records"]))
    assert main(["--params", "params.yaml", "-S", "scale=paper", "-S", "data=wmt14_en_de", "--device", "H200"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["row", "seeds", "steps"] and "total" in out and "measured speed" in out


def test_unmeasured_devices_say_so_and_unknown_ones_are_refused():
    model = ModelConfig()  # the paper's base
    assert speed("H200", model, 37000, (27, 28)).measured and not speed("A100", model, 37000, (27, 28)).measured
    with pytest.raises(KeyError, match="TPU"):
        speed("TPU", model, 37000, (27, 28))


def test_cpu_rates_are_the_measured_points_and_interpolated_between():
    """src/aiayn/cost/devices.yaml's CPU points: a shape measured gets its own rate; one between two gets a rate between
    them (log FLOPs per token); one outside the measured range the nearest point's."""
    from aiayn.cost.plan import _per_token

    def per_token(model: ModelConfig) -> float:
        return _per_token(model, 1000, (10, 10))

    small = ModelConfig(n_layers=1, d_model=32, d_ff=64, n_heads=2, d_k=16, d_v=16)
    middle = ModelConfig(n_layers=2, d_model=128, d_ff=512, n_heads=4, d_k=32, d_v=32)
    large, larger = ModelConfig(), ModelConfig(d_model=1024, d_ff=4096, d_k=128, d_v=128)
    assert per_token(small) < per_token(middle) < per_token(large) < per_token(larger)
    points = [(small, 0.02, "small"), (large, 0.04, "large")]
    table = {
        "CPU": {
            "points": [dict(per_token_mflops=per_token(m) / 1e6, sustained_tflops=r, measured=w) for m, r, w in points]
        }
    }
    for model, rate, where in (*points, (larger, 0.04, "large")):
        got = speed("CPU", model, 1000, (10, 10), table)
        assert got.train == pytest.approx(rate * 1e12, rel=1e-6) and got.source == where
    t = math.log(per_token(middle) / per_token(small)) / math.log(per_token(large) / per_token(small))
    assert speed("CPU", middle, 1000, (10, 10), table).train == pytest.approx((0.02 + t * 0.02) * 1e12, rel=1e-6)
    shipped = [p for p in load()["CPU"]["points"] if not p.get("when")]  # larger shapes keep more of a core busy
    assert [p["sustained_tflops"] for p in sorted(shipped, key=lambda p: p["per_token_mflops"])] == sorted(
        p["sustained_tflops"] for p in shipped
    )


def test_a_point_measured_with_settings_prices_only_runs_that_have_them(params, repo_root, tmp_path):
    """A CPU point with `when` (the two speed keys of m30k_budget, with both cores pinned to a run or the launcher's
    share) prices a run with those settings, and no other; a run pinned to both cores of the 2-core machine takes
    them from the launcher's other seeds, and with the launcher's share two seeds run side by side."""
    from aiayn.cost.plan import plan

    model = ModelConfig()
    table = {
        "CPU": {
            "points": [
                dict(per_token_mflops=5.0, sustained_tflops=0.03, measured="one core"),
                dict(per_token_mflops=5.0, sustained_tflops=0.07, measured="both", when={"trainer.threads": 2}),
            ]
        }
    }
    assert speed("CPU", model, 1000, (10, 10), table).source == "one core"
    assert speed("CPU", model, 1000, (10, 10), table, {"trainer.threads": 1}).source == "one core"
    assert speed("CPU", model, 1000, (10, 10), table, {"trainer.threads": 2}).train == pytest.approx(0.07e12)
    sets = ["data=multi30k_tok", "rows=[base]", "seeds=[1,2,3,4]"]
    budget = plan(apply_sets(params, [*sets, "scale=m30k_budget"]), "CPU", tmp_path)
    budget_steps = yaml.safe_load((repo_root / "conf" / "scale" / "m30k_budget.yaml").read_text())["train"]["max_steps"]
    tiny = plan(apply_sets(params, [*sets, "scale=m30k_tiny", f"train.max_steps={budget_steps}"]), "CPU", tmp_path)
    assert "side by side" in budget["records"][0]["speed"] and "m30k_tiny" in tiny["records"][0]["speed"]
    # the same FLOPs, and the launcher's share: two seeds side by side, a core each
    assert budget["flops"] == pytest.approx(tiny["flops"])
    for side_by_side in (budget, tiny):
        assert side_by_side["wall_hours"] == pytest.approx(2 * side_by_side["records"][0]["hours_per_run"])
    # both cores pinned to each seed in turn: 1.30-1.38x longer for the four (docs/results.md#seeds-side-by-side)
    fast = {"train.loss_skip_pad": True, "train.deterministic_fill": False}
    alone = speed("CPU", model, 10000, (14.0, 15.0), None, {**fast, "trainer.threads": 2})
    shared = speed("CPU", model, 10000, (14.0, 15.0), None, {**fast, "trainer.threads": None})
    assert "alone" in alone.source and "side by side" in shared.source
    assert 1.2 < (4 / alone.train) / (2 / shared.train) < 1.5


def test_sets_are_applied_as_dvc_exp_run_would(params):
    out = apply_sets(params, ["train.max_steps=50", "rows=[base,big]", "decode.beam_size=8"])
    assert out["train"]["max_steps"] == 50 and out["rows"] == ["base", "big"] and out["decode"]["beam_size"] == 8
    assert params["train"]["max_steps"] is None  # the caller's copy is untouched


def test_flops_per_token_match_torch_flop_counter_on_a_small_model():
    """aiayn.cost.flops against torch.utils.flop_counter.FlopCounterMode: a forward pass of a small Transformer over
    unpadded batches counts the same matmul FLOPs (attention products at full length, as a masked pass computes
    them)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from aiayn.model.config import ModelConfig
    from aiayn.model.transformer import Transformer

    dims = dict(n_layers=2, d_model=32, d_ff=64, n_heads=4, d_k=8, d_v=12)
    model = Transformer(ModelConfig(**dims, dropout=0.0), vocab_size=50).eval()
    batch, src_len, tgt_len = 3, 7, 5
    src, tgt_in = torch.randint(1, 50, (batch, src_len)), torch.randint(1, 50, (batch, tgt_len))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(src, tgt_in)
    parts = forward_flops_per_token(**dims, vocab_size=50, src_len=src_len, tgt_len=tgt_len)
    ours = batch * (src_len * parts["per_src_token"] + tgt_len * parts["per_tgt_token"])
    assert counter.get_total_flops() == pytest.approx(ours, rel=1e-9)


def test_a_gpu_measurement_rewrites_one_entry_and_keeps_the_comments(tmp_path):
    from aiayn.cost.devices import TABLE, load, record

    table = tmp_path / "devices.yaml"
    table.write_text(TABLE.read_text())
    assert record("NVIDIA H200", "base", 0.4123, "2026-12-02, gpu/gpu_check.sh", table) == "H200"
    assert record("NVIDIA A100-SXM4-80GB", "big", 0.5, "2026-12-02, gpu/gpu_check.sh", table) == "A100"
    before, after = load(TABLE), load(table)
    assert after["H200"]["base"] == {"mfu": 0.412, "measured": "2026-12-02, gpu/gpu_check.sh"}
    assert after["A100"]["big"]["mfu"] == 0.5 and after["A100"]["base"] == before["A100"]["base"]
    assert {k: v for k, v in after.items() if k not in ("H200", "A100")} == {
        k: v for k, v in before.items() if k not in ("H200", "A100")
    }
    comments = [line for line in TABLE.read_text().splitlines() if line.lstrip().startswith("#")]
    assert comments and all(line in table.read_text() for line in comments)
    with pytest.raises(KeyError, match="TPU v5"):
        record("TPU v5", "base", 0.3, "x", table)


@pytest.mark.parametrize(
    "hours, shown",
    [(0.005, "18 s"), (0.4, "24 min"), (1.99, "119 min"), (2.5, "2.5 hours"), (50, "2 days"), (507270.7, "58 years")],
)
def test_a_duration_reads_in_units_a_person_reads(hours: float, shown: str):
    assert duration(hours) == shown


def test_an_unmeasured_device_says_what_its_estimate_assumes(capsys):
    assert main(["--params", "params.yaml", "-S", "scale=paper", "-S", "data=wmt14_en_de", "--device", "H100"]) == 0
    out = capsys.readouterr().out
    assert "H100 hours from an estimated speed (H200's measured MFU" in out


def test_a_model_far_smaller_than_base_on_a_gpu_is_priced_as_a_lower_bound(params, tmp_path):
    """Base's MFU does not carry to a model 19x smaller per token (m30k_budget), whose steps wait on kernel launches:
    the plan says its time is a lower bound, unmeasured, and names the call that measures it; base stays measured."""
    from aiayn.cost.plan import format_plan, plan

    sets = ["data=multi30k_tok", "rows=[base]", "seeds=[1,2,3,4]", "trainer=gpu", "launcher=basic"]
    small = plan(apply_sets(params, [*sets, "scale=m30k_budget"]), "H200", tmp_path)
    assert not small["records"][0]["measured"] and small["records"][0]["lower_bound"]
    assert "kernel launches" in small["records"][0]["speed"]
    shown = format_plan(small)
    assert "at least" in shown and "gpu/gpu_pipeline.sh" in shown
    paper = plan(apply_sets(params, ["scale=paper", "data=wmt14_en_de", *sets[1:]]), "H200", tmp_path)
    assert paper["records"][0]["measured"] and "about" in format_plan(paper).splitlines()[-1]
    # an unmeasured device at base's shape is an estimate, not a bound
    assert "about" in format_plan(plan(apply_sets(params, ["scale=paper", *sets[1:]]), "A100", tmp_path))
