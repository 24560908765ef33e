#!/usr/bin/env bash
# The real pipeline on one GPU: `dvc repro` of Multi30k at scale=small, trainer=gpu (bf16), rows base and D1 x seeds
# 1 and 2, 2000 updates each, in a fresh copy of the project (gpu/gpu_pipeline.py does the work). Prints each
# stage's time, dev/test BLEU, dev PPL and tokens/s per run, results/table3.md and table2.md, then RESULT lines
# (headline last: base_dev_bleu). With $OUT set, the log, the tables and runs.json are written there.
#
# The GPU image lacks DVC, Hydra and some of their dependencies, and ../shared does not travel, so first, here, once:
#   bash gpu/gpu_pipeline.sh --prepare   # .whl/: the lock (requirements.txt) and its cp312 wheels; .gpu_data/multi30k
# (both git-ignored). What is carried is pyproject.toml's dependencies less what gpu/gpu-image.txt, the image's
# package list, already satisfies; a run with $OUT set writes the machine's own list to $OUT/gpu-image.txt.
# Then the device tool's call (15 minutes of device time in all: the machine's start, this run and one rerun):
#   run(command="bash gpu/gpu_pipeline.sh --data .gpu_data/multi30k --workdir /tmp/aiayn-gpu-pipeline --budget-s 300",
#       carry=[".whl", ".gpu_data"], timeout_s=360)
# A run stopped at --budget-s keeps its copy in /tmp/aiayn-gpu-pipeline while the machine stays warm (30 s): the
# same call at once resumes there (finished seeds are skipped, a stopped one goes on from its last checkpoint).
# Issue 49's Table 2 on the GPU (gpu/gpu_pipeline.py --recipe m30k: Wu et al.'s Transformer-tiny on Multi30k's
# tokenised files, scale=m30k_tiny with its stopping rule, float32, base x seeds 1-4 side by side; prepare also fills
# .gpu_data/multi30k-tok, the mirror folder):
#   run(command="bash gpu/gpu_pipeline.sh --recipe m30k --data .gpu_data/multi30k-tok --workdir /tmp/aiayn-m30k \
#       --budget-s 540", carry=[".whl", ".gpu_data"], timeout_s=600)
# Whether the four seeds (3,300-5,100 updates each on CPU) and their beam-5 evaluation fit one call is unmeasured:
# a call stopped at its budget resumes with the same call only while the machine is warm and device time is left,
# and its RESULT base_seeds_evaluated says how many seeds the headline averages. `--rows base D1 E` adds Table 3's
# chosen rows (a second session's call).
# Issue 61's eight seeds of the budget recipe (--recipe m30k_budget: scale=m30k_budget, 1,800 updates, float32, base x
# seeds 1-8 side by side; the seeds kept in kept/ from CPU runs are skipped, the rest train here and join them in
# Table 2, and come back under $OUT/evals for `aiayn-keep <files_at>/evals/base/seedN`, then a commit):
#   run(command="bash gpu/gpu_pipeline.sh --recipe m30k_budget --data .gpu_data/multi30k-tok \
#       --workdir /tmp/aiayn-m30k-budget --budget-s 480", carry=[".whl", ".gpu_data"], timeout_s=540)
# Then, in a second call, learning parity (studies/learning_parity.py: the pipeline against a plain nn.Transformer
# script, 3 seeds each, 3 runs side by side on the GPU) at the issue's setting, further than on CPU:
#   run(command="bash gpu/gpu_pipeline.sh --parity --data .gpu_data/multi30k --steps 3000",
#       carry=[".whl", ".gpu_data"], timeout_s=420)
# CPU smoke (the same flow on trainer=cpu: a tiny model, 40 steps, a 2000-pair slice): bash gpu/gpu_pipeline.sh --cpu-smoke
# (and --recipe m30k --cpu-smoke, --recipe m30k_budget --cpu-smoke for the Multi30k recipes')
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
if [[ "${1:-}" == "--prepare" ]]; then
  exec "$PY" gpu/gpu_pipeline.py prepare "${@:2}"
fi
if [[ -n "${OUT:-}" ]]; then "$PY" -m pip list --format=freeze > "$OUT/gpu-image.txt"; fi  # the image's own
if ! "$PY" -c "import dvc, hydra, sacremoses" 2>/dev/null; then  # the GPU image: install the carried wheels
  [[ -d .whl ]] || { echo "no DVC/Hydra here and no .whl/: run 'bash gpu/gpu_pipeline.sh --prepare' first"; exit 2; }
  [[ -d /tmp/site/dvc ]] || "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site --find-links .whl -r .whl/requirements.txt
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" -c "import torch, lightning; print('torch', torch.__version__, 'lightning', lightning.__version__, 'cuda', torch.cuda.is_available())"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
if [[ "${1:-}" == "--parity" ]]; then  # issue 16's other GPU check: studies/learning_parity.py on this GPU
  exec "$PY" studies/learning_parity.py --device cuda "${@:2}"
fi
exec "$PY" gpu/gpu_pipeline.py run "$@"
