"""`dvc repro` end to end in a temporary copy of the repository (a real DVC repo) at the smoke scale."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.run.test_floatpath import pinned

from aiayn.train.fingerprint import CANNOT_CHANGE_RESULTS, module_file

REPO = Path(__file__).resolve().parents[3]


def run(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        HYDRA_FULL_ERROR="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **(extra_env or {}),
    )
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def dvc(*args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> str:
    return run([sys.executable, "-m", "dvc", *args], cwd, extra_env).stdout


# Imported by every Python process the pipeline starts (PYTHONPATH): records, per DVC stage, every file a stage's
# processes open (Python's "open" audit event: open(), os.open, and the imports' io.open_code), so that a test can
# check the stage's declared deps and outs against what it really reads and writes. Child processes (the parallel
# launcher's workers) inherit the stage through the environment.
AUDIT_HOOK = """
import json, os, sys

_log, _busy, _fd = os.environ.get("AIAYN_AUDIT_LOG"), False, None


def _stage():
    stage = os.environ.get("AIAYN_AUDIT_STAGE")
    argv = getattr(sys, "orig_argv", [])
    if stage is None and len(argv) > 1 and argv[1].startswith("pipeline/") and argv[1].endswith(".py"):
        stage = os.environ["AIAYN_AUDIT_STAGE"] = json.dumps(argv[1:])
    return stage


def _hook(event, args):
    global _busy, _fd
    if event != "open" or _busy or not isinstance(args[0], str):
        return
    _busy = True
    try:
        stage = _stage()
        if stage is not None:
            if _fd is None:
                _fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            write = (any(c in mode for c in "wax+") if isinstance(mode, str)
                     else bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)))
            if not write and not os.path.isfile(args[0]):  # a folder, or a name relative to a dir_fd (rmtree)
                return
            os.write(_fd, (json.dumps([stage, os.path.abspath(args[0]), write]) + "\\n").encode())
    finally:
        _busy = False


if _log:
    sys.addaudithook(_hook)
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory, copy_project) -> Path:
    """The project's files (as git sees them) in a fresh git + DVC repo, set to the smoke scale and 2 seeds, after
    a `dvc repro` whose stages' file accesses were recorded (audit.jsonl beside it)."""
    dst = copy_project(tmp_path_factory.mktemp("repo"), scale="smoke", rows=["base"], seeds=[1, 2])
    hook = tmp_path_factory.mktemp("audit_hook")
    (hook / "sitecustomize.py").write_text(AUDIT_HOOK)
    dvc("repro", cwd=dst, extra_env={"PYTHONPATH": str(hook), "AIAYN_AUDIT_LOG": str(hook / "audit.jsonl")})
    (dst.parent / "audit.jsonl").write_text((hook / "audit.jsonl").read_text())
    git_commit(dst, "smoke-scale reproduction")
    return dst


def git_commit(repo: Path, message: str) -> None:
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-qm", message], repo)


def test_repro_writes_table3_with_every_row_and_seed(repo: Path) -> None:
    with open(repo / "results" / "table3.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["row"], r["n_seeds"]) for r in rows] == [("base", "2")]
    assert (repo / "results" / "table3.md").exists()


def test_dvc_repro_trains_and_evaluates_on_the_pinned_float_path(repo: Path) -> None:
    """trainer=cpu pins one thread and AVX2 kernels (aiayn.run.floatpath) in the seeds the parallel launcher forks,
    before their first tensor operation: train.json and eval.json say so (on a CPU with AVX2), and no pin came too
    late."""
    cpuinfo = Path("/proc/cpuinfo")
    if not (cpuinfo.exists() and "avx2" in cpuinfo.read_text()):
        pytest.skip("needs an x86-64 CPU with AVX2")
    for seed in (1, 2):
        train = json.loads((repo / "runs" / "base" / f"seed{seed}" / "train.json").read_text())
        evaluated = json.loads((repo / "evals" / "base" / f"seed{seed}" / "eval.json").read_text())
        assert train["float_path"] == evaluated["float_path"] == pinned()


def test_every_output_file_is_stored_once(repo: Path) -> None:
    # DVC links its cache into the workspace (.dvc/config's cache.type), directory outputs such as runs/base too:
    # each file of an out shares its inode with the cache, so the checkpoints are on disk once, not twice.
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    outs = {repo / o["path"] for stage in lock["stages"].values() for o in stage.get("outs", [])}
    files = [f for o in outs for f in ([o] if o.is_file() else o.rglob("*")) if f.is_file() and f.name != ".lock"]
    cached = {f.stat().st_ino for f in (repo / ".dvc" / "cache").rglob("*") if f.is_file()}
    linked = {f.read_bytes() for f in files if f.stat().st_ino in cached}
    # DVC links one of two files with the same bytes (the smoke model's dev hypotheses can be alike across seeds)
    copied = [str(f.relative_to(repo)) for f in files if f.stat().st_ino not in cached and f.read_bytes() not in linked]
    assert any(f.suffix == ".ckpt" for f in files) and not copied, copied


def test_a_model_code_edit_redoes_the_runs_and_figures_not_the_tables(repo: Path) -> None:
    """aggregate reads what evaluate wrote (JSON, text, the runs' small files copied beside them), never a model:
    an edit of the model code changes train, evaluate and attention_figures, and not aggregate itself."""
    model = repo / "src" / "aiayn" / "model" / "transformer.py"
    before = model.read_text()
    try:
        model.write_text(before + "\nEDITED = True\n")
        changed = {
            line.strip().rstrip(":")
            for line in dvc("status", cwd=repo).splitlines()
            if line and not line.startswith(("\t", " "))
        }
    finally:
        model.write_text(before)
    assert {"train@base", "evaluate@base", "attention_figures"} <= changed and "aggregate" not in changed, changed
    deps = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]["aggregate"]["deps"]
    schema = ("src/aiayn/model/__init__.py", "src/aiayn/model/config.py")  # the model's config, part of the schema
    code = [d for d in deps if d.startswith(("src/aiayn/model", "src/aiayn/decode", "src/aiayn/eval", "runs"))]
    assert set(code) <= set(schema), deps
    assert not [d for d in deps if "tokenizer" in d or d.startswith("data/bpe")], deps


def test_second_repro_reruns_nothing(repo: Path) -> None:
    # Bytecode that Python writes into src/ as stages import it (an editable install) changes no stage.
    run([sys.executable, "-m", "compileall", "-q", "src", "pipeline"], repo)
    out = dvc("repro", cwd=repo)
    assert "Running stage" not in out, out
    assert "up to date" in dvc("status", cwd=repo)


def test_every_job_left_an_offline_wandb_run(repo: Path) -> None:
    runs = sorted((repo / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 2 + 2 + 1 + 1, runs  # train and eval for two seeds, one aggregate, one attention_figures


def test_dag_is_fetch_bpe_train_evaluate_aggregate(repo: Path) -> None:
    dag = dvc("dag", "--md", cwd=repo)
    for edge in (
        "fetch --> bpe",
        "bpe --> train@base",
        "seeds --> train@base",
        "seeds --> evaluate@base",
        "train@base --> evaluate@base",
        "evaluate@base --> aggregate",
        "train@base --> attention_figures",
    ):
        assert edge.split(" --> ")[0] in dag and edge.split(" --> ")[1] in dag


PLOTS = (
    "validation perplexity of every run",
    "dev BLEU by row (mean and 95% CI over seeds)",
    "row minus base, dev BLEU (ours with the family interval that decides the verdict; paper at this setting as "
    "red crosses)",
    "Table 2, test BLEU (paper systems as bars; ours with 95% CI)",
    "results/claims.png",
    "results/learning_curves.png",
)


def attention_figures(repo: Path) -> set[str]:
    """The attention_figures stage's figures (base seed 1's), by their path in the repo."""
    return {f"results/attention/{p.name}" for p in (repo / "results" / "attention").glob("*.png")}


def test_dvc_plots_show_every_plot_the_readme_promises(repo: Path) -> None:
    plots = json.loads(dvc("plots", "show", "--json", cwd=repo))["data"]
    figures = attention_figures(repo)
    assert figures and all(name.startswith("results/attention/base-s1-dev") for name in figures), figures
    assert set(plots) == set(PLOTS) | figures, sorted(plots)
    curves = plots[PLOTS[0]][0]["content"]
    assert {p["run"] for p in curves["data"]["values"]} == {"base-s1", "base-s2"}
    assert curves["encoding"]["detail"]["field"] == "run"  # .dvc/plots/runs.json: one line per run, coloured by row
    bleu = plots[PLOTS[1]][0]["content"]
    assert [p["row"] for p in bleu["data"]["values"]] == ["base"]
    assert {layer["mark"]["type"] for layer in bleu["layer"]} == {"rule", "point"}  # CI bars (.dvc/plots/bleu_ci)
    table2 = plots[PLOTS[3]][0]["content"]["data"]["values"]
    assert {"Transformer (base model), ours", "ConvS2S"} <= {p["system"] for p in table2}
    assert all(plots[name][0]["type"] == "image" for name in [*PLOTS[4:], *figures])
    diff = json.loads(dvc("plots", "diff", "HEAD", "--json", cwd=repo))["data"][PLOTS[1]][0]["content"]
    assert {p["rev"] for p in diff["data"]["values"]} == {"HEAD", "workspace"}  # one colour per revision


VEGA = ("vega@5", "vega-lite@5", "vega-embed@6")  # what DVC's page loads from a CDN, here from the npm registry


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless Chromium; the browser test skips without it (apt-get install chromium)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return path


@pytest.fixture(scope="session")
def vega_libs(chromium, tmp_path_factory) -> Path:
    """vega, vega-lite and vega-embed from the npm registry (this machine has no CDN), for rendering offline."""
    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    root = tmp_path_factory.mktemp("vega")
    proc = subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", *VEGA],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode:
        pytest.skip(f"npm could not install {VEGA}: {proc.stderr[-300:]}")
    return root / "node_modules"


CHROMIUM = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--virtual-time-budget=20000",
)


def test_dvc_plots_render_in_a_real_browser(repo: Path, chromium: str, vega_libs: Path, tmp_path: Path) -> None:
    """`dvc plots show` rendered by headless Chromium (Debian's package): every vega plot draws an SVG, every
    image loads (the two figures and the attention figures); the screenshot is left in the test's folder."""
    scripts = "".join(
        f'<script src="file://{vega_libs / lib}"></script>'
        for lib in ("vega/build/vega.min.js", "vega-lite/build/vega-lite.js", "vega-embed/build/vega-embed.min.js")
    )
    template = tmp_path / "offline.html"
    template.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>aiayn plots</title>{scripts}'
        "</head><body>{plot_divs}</body></html>"
    )
    dvc("plots", "show", "--html-template", str(template), "-o", str(tmp_path / "html"), cwd=repo)
    page = (tmp_path / "html" / "index.html").as_uri()
    profile = ["--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run(
        [chromium, *CHROMIUM, *profile, "--dump-dom", page], capture_output=True, text=True, timeout=180
    ).stdout
    embeds = dom.split('class="vega-embed')[1:]
    assert len(embeds) == 4 and all("<svg" in e.split("</details>")[-1][:5000] or "<svg" in e for e in embeds)
    assert dom.count("<svg") >= 4 and "Error" not in dom and dom.count("<img") == 2 + len(attention_figures(repo))
    shot = tmp_path / "plots.png"
    subprocess.run(
        [chromium, *CHROMIUM, *profile, "--window-size=1300,3000", f"--screenshot={shot}", page],
        capture_output=True,
        timeout=180,
    )
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000


def test_adding_a_row_changes_only_that_rows_stages(repo: Path) -> None:
    """A new kind of ablation is one row file (here the shipped conf/row/X_preln.yaml) plus one line in params.yaml."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["rows"] = ["base", "X_preln"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    changed = {
        line.strip().rstrip(":")
        for line in dvc("status", cwd=repo).splitlines()
        if line and not line.startswith(("\t", " "))
    }
    run(["git", "checkout", "-q", "--", "params.yaml"], repo)
    # The seeds stage reruns (it writes every row's seed list), but leaves the other rows' lists as they were.
    assert changed == {"seeds", "train@X_preln", "evaluate@X_preln", "aggregate", "attention_figures"}, changed


def test_hydra_multirun_runs_two_seeds(repo: Path) -> None:
    run(
        [
            sys.executable,
            "pipeline/train.py",
            "-m",
            "seed=1,2",
            "scale=smoke",
            "logger=none",
            "trainer.enable_progress_bar=false",
            "paths.runs=multirun_runs",
        ],
        repo,
    )
    for seed in (1, 2):
        assert (repo / "multirun_runs" / "base" / f"seed{seed}" / "train.json").exists()


def test_a_hydra_sweep_keeps_every_point_and_tabulates_it(repo: Path) -> None:
    """Two points x 2 seeds: four run folders named by the override (never one overwriting the other), four eval
    folders, and a two-line sweep table."""
    common = [
        "scale=smoke",
        "logger=none",
        "trainer.enable_progress_bar=false",
        "paths.runs=sweep/runs",
        "paths.evals=sweep/evals",
    ]
    run([sys.executable, "pipeline/train.py", "-m", "train.lr_factor=0.5,2", "seed=1,2", *common], repo)
    run(
        [sys.executable, "pipeline/evaluate.py", "-m", "train.lr_factor=0.5,2", "seed=1,2", "decode=greedy", *common],
        repo,
    )
    run(
        [
            sys.executable,
            "pipeline/aggregate.py",
            *common,
            "paths.results=sweep/results",
            "tables.rows=[base]",
            "tables.seeds=[1,2]",
        ],
        repo,
    )
    runs = sorted(
        p.parent.relative_to(repo / "sweep" / "runs").as_posix()
        for p in (repo / "sweep" / "runs").glob("**/train.json")
    )
    assert runs == [
        "base/lr_factor=0.5/seed1",
        "base/lr_factor=0.5/seed2",
        "base/lr_factor=2/seed1",
        "base/lr_factor=2/seed2",
    ]
    evals = sorted(p.parent.parent.name for p in (repo / "sweep" / "evals").glob("**/eval.json"))
    assert (
        evals
        == ["lr_factor=0.5,strategy=greedy,beam_size=1,length_penalty=0"] * 2
        + ["lr_factor=2,strategy=greedy,beam_size=1,length_penalty=0"] * 2
    )
    with open(repo / "sweep" / "results" / "sweep.csv", encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    assert [(r["set.train.lr_factor"], r["n_seeds"]) for r in lines] == [("0.5", "2"), ("2.0", "2")]
    assert lines[0]["delta_bleu"] == "" and lines[1]["delta_bleu"] != ""  # against the sweep's first point
    assert "| base |" in (repo / "sweep" / "results" / "sweep.md").read_text()


def test_exp_run_with_one_more_seed_trains_only_that_seed(repo: Path) -> None:
    before = (repo / "runs" / "base" / "seed1" / "train.json").read_text()
    out = dvc("exp", "run", "-S", "seeds=[1,2,3]", cwd=repo)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"seeds", "train@base", "evaluate@base", "aggregate", "attention_figures"}, out
    for seed in (1, 2):  # the row's stage reran, but its finished seeds were skipped, not retrained
        assert f"runs/base/seed{seed}: already trained to step" in out, out
    assert "runs/base/seed3: already trained" not in out
    assert (repo / "runs" / "base" / "seed1" / "train.json").read_text() == before
    with open(repo / "results" / "table3.csv", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["n_seeds"] == "3"


# Read by stages but not declared, each for a reason: how a run is observed or scheduled, never what it computes.
# The modules among them are aiayn.train.fingerprint's list of code that cannot change results, those that change no
# output at all: one list, which also keeps them out of a run's code digest.
UNDECLARED_OK = {
    "conf/logger/": "where wandb logs (logger=none turns it off); results do not depend on it",
    "conf/hydra/": "the launcher that schedules a row's seeds (local processes, in turn, SLURM); same results",
    "src/hydra_plugins/": "the fork launcher (Hydra scans its plugins in every stage); same results",
    "src/aiayn/__init__.py": "an empty package marker",
    **{module_file(m): u.why for m, u in CANNOT_CHANGE_RESULTS.items() if u.no_output},
}
# Composed by a stage (every stage is a Hydra app on conf/config.yaml, whose defaults name every group) but never
# read for its outputs: fetch and bpe read data, scale and paths; aggregate reads paths and the run folders.
COMPOSED_NOT_READ = {
    "fetch": ("conf/row/", "conf/model/", "conf/decode/", "conf/trainer/"),
    "bpe": ("conf/row/", "conf/model/", "conf/decode/", "conf/trainer/"),
    "aggregate": ("conf/row/", "conf/model/", "conf/decode/", "conf/trainer/", "conf/data/", "conf/scale/"),
    "attention_figures": ("conf/row/", "conf/model/", "conf/decode/", "conf/trainer/", "conf/data/", "conf/scale/"),
    "train": ("conf/decode/",),
}
# DVC's own state, the installed environment, and the .dvcignore'd logs.
NOT_PIPELINE_DATA = (".git/", ".dvc/", ".venv/", "src/aiayn.egg-info/", "outputs/", "multirun/", "wandb/")


def _relative(path: str, roots: list[Path]) -> str | None:
    """`path` relative to the copied repo or to the checkout whose package and conf/ the stages import (an
    editable install), bytecode mapped to its source; None outside both."""
    for root in roots:
        if path.startswith(f"{root}/"):
            rel = path[len(str(root)) + 1 :]
            if "/__pycache__/" in rel:
                folder, name = rel.split("/__pycache__/")
                rel = f"{folder}/{name.split('.')[0]}.py"
            folder, _, name = rel.rpartition("/")
            if name.startswith(".") and name.endswith(".tmp"):  # aiayn.io's atomic write of `name`
                rel = f"{folder}/{name[1:].rsplit('.', 2)[0]}".lstrip("/")
            return rel
    return None


def _covered(rel: str, paths: list[str]) -> bool:
    return any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in paths)


def test_every_file_a_stage_reads_is_a_dep_and_every_file_it_writes_an_out(repo: Path) -> None:
    """dvc.yaml's deps are derived from what each stage really opened during `dvc repro` (its imported aiayn
    modules, the conf/ files Hydra composed, the data it read), not kept by hand."""
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    by_cmd = {
        tuple(cmd.split()[1:]): name
        for name, entry in lock.items()
        for cmd in (entry["cmd"] if isinstance(entry["cmd"], list) else [entry["cmd"]])
    }  # a stage of several commands (evaluate: the seeds, then their ensemble) is each of them
    roots = [repo, REPO]
    reads: dict[str, set[str]] = {}
    writes: dict[str, set[str]] = {}
    for line in (repo.parent / "audit.jsonl").read_text().splitlines():
        argv, path, write = json.loads(line)
        stage = by_cmd.get(tuple(json.loads(argv)))
        rel = _relative(path, roots)
        if stage is None or rel is None or rel.startswith(NOT_PIPELINE_DATA) or _covered(rel, list(UNDECLARED_OK)):
            continue
        if rel.startswith(COMPOSED_NOT_READ.get(stage.split("@")[0], ())):
            continue
        (writes if write else reads).setdefault(stage, set()).add(rel)
    assert set(reads) >= {"fetch", "bpe", "seeds", "train@base", "evaluate@base", "aggregate"}, sorted(reads)
    problems = []
    for stage, entry in lock.items():
        deps = [d["path"] for d in entry.get("deps", [])] + (["params.yaml"] if entry.get("params") else [])
        outs = [o["path"] for o in entry.get("outs", [])]
        problems += [
            f"{stage} reads {rel}, which dvc.yaml does not list as a dep"
            for rel in sorted(reads.get(stage, ()))
            if not _covered(rel, deps + outs)
        ]
        problems += [
            f"{stage} writes {rel}, which dvc.yaml does not list as an out"
            for rel in sorted(writes.get(stage, ()))
            if not _covered(rel, outs)
        ]
    assert not problems, "\n".join(problems)


def test_exp_run_sets_any_config_key_and_reruns_only_the_stages_it_concerns(repo: Path) -> None:
    out = dvc("exp", "run", "-S", "train.lr_factor=2", cwd=repo)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"train@base", "evaluate@base", "aggregate", "attention_figures"}, out
    assert (repo / "runs" / "base" / "lr_factor=2" / "seed1" / "train.json").is_file()
    assert (repo / "runs" / "base" / "seed1" / "train.json").is_file()  # the row's own runs are kept
    config = yaml.safe_load((repo / "runs" / "base" / "lr_factor=2" / "seed1" / "config.yaml").read_text())
    assert config["train"]["lr_factor"] == 2 and config["variant"] == {"train.lr_factor": 2.0}
    out = dvc("exp", "run", "-S", "decode.beam_size=2", cwd=repo)  # a decode setting: no retraining
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"evaluate@base", "aggregate", "attention_figures"}, out  # the figures translate with it
    assert (repo / "evals" / "base" / "lr_factor=2,beam_size=2" / "seed2" / "eval.json").is_file()
    shown = json.loads(dvc("exp", "show", "--json", cwd=repo))
    params = next(iter(shown))["data"]["params"]["params.yaml"]["data"]  # the workspace
    assert params["train"]["lr_factor"] == 2 and params["decode"]["beam_size"] == 2


def read_wandb_runs(repo: Path) -> list[dict]:
    """Every offline wandb run of the repo read back with `wandb leet inspect --json`: its id, job type, name,
    config (updates merged), logged artifacts (name -> digest) and history keys."""
    out = []
    for folder in sorted((repo / "wandb").glob("offline-run-*")):
        text = run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)], repo).stdout
        info = {"folder": folder.name, "config": {}, "artifacts": {}, "history": set()}
        for line in text.splitlines():
            record = json.loads(line)
            kind, body = record.get("type"), record.get(record.get("type"), {})
            if kind == "run":
                info.update(id=body["run_id"], job_type=body.get("job_type"), name=body.get("display_name"))
                info["config"].update(_config_items(body.get("config", {})))
            elif kind == "config":
                info["config"].update(_config_items(body))
            elif kind == "artifact":
                info["artifacts"][body["name"]] = body["digest"]
            elif kind == "history":
                info["history"] |= set(body.get("item", {}))
        out.append(info)
    return out


def _config_items(config: dict) -> dict:
    """A config record's key -> value (wandb stores updates as {"update": {key: value}} or a list of items)."""
    update = config.get("update", config)
    if isinstance(update, list):
        return {item["key"]: json.loads(item["value_json"]) for item in update if "value_json" in item}
    return {k: (v.get("value") if isinstance(v, dict) and set(v) == {"value"} else v) for k, v in update.items()}


def test_wandb_runs_carry_lineage_from_checkpoints_to_evaluations_to_tables(repo: Path) -> None:
    runs = read_wandb_runs(repo)  # in the order they started; later tests' experiments add runs of their own

    def first(job_type: str) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for r in runs:
            if r["job_type"] == job_type:
                found.setdefault(r["name"], r)
        return found

    train, evals = first("train"), first("eval")
    aggregate = next(iter(first("aggregate").values()))  # the fixture's dvc repro
    assert {"base-s1", "base-s2"} <= set(train) & set(evals)
    for name in ("base-s1", "base-s2"):
        digest = train[name]["artifacts"][f"checkpoints-{name}"]  # a reference to runs/base/seedN/checkpoints
        assert evals[name]["config"]["inputs"] == {f"checkpoints-{name}": digest}
        assert aggregate["config"]["inputs"][f"eval-{name}"] == evals[name]["artifacts"][f"eval-{name}"]
        assert {"dev/bleu", "dev/ppl", "test/bleu"} <= evals[name]["history"]  # dev scores under dev/
        assert "trainer/global_step" in train[name]["history"]
    assert "tables-smoke" in aggregate["artifacts"]
    logged = {key.split(".")[0] for key in aggregate["history"]}  # a table's or chart's fields are flattened
    assert {"table3", "table2", "sweep", "dev/bleu_by_row_table", "claims", "learning_curves"} <= logged


def test_a_refused_exp_run_leaves_params_yaml_as_it_was(repo: Path) -> None:
    """DVC writes `-S` values into params.yaml before any stage runs (and rewrites the file: comments dropped, nulls
    emptied); the stage that refuses a misspelt key puts the file back as it was last accepted, so the next `dvc
    repro` runs, and keeps the refused one beside it."""
    before = (repo / "params.yaml").read_bytes()
    env = dict(os.environ, WANDB_MODE="offline", PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", "exp", "run", "-S", "+train.lr_factr=2"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "unknown key 'train.lr_factr' (did you mean 'train.lr_factor'?)" in out, out
    assert (repo / "params.yaml").read_bytes() == before
    assert "lr_factr" in (repo / "params.yaml.refused").read_text()
    assert "up to date" in dvc("status", cwd=repo)  # the next `dvc repro` runs on the file as it was


def test_a_killed_exp_run_resumes_with_dvc_repro(repo: Path) -> None:
    """`dvc exp run` first puts the baseline's outputs in the workspace, which removes a killed run's checkpoints
    that no commit holds; `dvc repro` runs on the workspace as the killed `dvc exp run` left it (params.yaml keeps the
    -S values), so it resumes the seed from its last checkpoint (docs/usage.md, "A killed run resumes")."""
    import signal
    import time

    env = dict(os.environ, WANDB_MODE="offline", PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    victim = subprocess.Popen(
        [sys.executable, "-m", "dvc", "exp", "run", "-S", "seeds=[5]", "-S", "train.max_steps=40"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the stage's processes go with it
    )
    deadline = time.monotonic() + 300
    # runs/base/{variant}/seed5: earlier tests leave variants (lr_factor=2, ...) in params.yaml
    while not (found := list((repo / "runs" / "base").glob("**/seed5/checkpoints/last.ckpt"))):
        assert victim.poll() is None, victim.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no checkpoint of seed 5 within 300 s"
        time.sleep(0.02)
    run_dir = found[0].parents[1]
    os.killpg(victim.pid, signal.SIGKILL)
    victim.communicate()
    assert not (run_dir / "train.json").exists()  # killed mid-way, not after the end
    assert yaml.safe_load((repo / "params.yaml").read_text())["seeds"] == [5]
    out = dvc("repro", cwd=repo)
    assert f"{run_dir.relative_to(repo).as_posix()}: resuming from " in out, out
    assert json.loads((run_dir / "train.json").read_text())["steps"] == 40
    assert list((repo / "evals" / "base").glob("**/seed5/eval.json"))
