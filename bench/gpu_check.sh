#!/usr/bin/env bash
# One GPU check in under 8 minutes (one H200): base and big at the paper's batch in bf16 with fused attention and
# fused Adam, then base with torch.compile. Needs only python3 with torch (and lightning, for the peak table);
# nothing is installed. Prints RESULT lines; the headline (base MFU against the dense bf16 peak) comes last.
# Usage: bash bench/gpu_check.sh            CPU dry run: bash bench/gpu_check.sh --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
"$PY" -c "import torch, lightning; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if [[ "${1:-}" == "--dry-run" ]]; then
  timeout 300 "$PY" bench/gpu_check.py --shape tiny --steps 2 --warmup 1
  exit 0
fi
# Budget (s): base ~60, big ~150, compiled base ~180 (compilation included); each has its own time limit.
timeout 120 "$PY" bench/gpu_check.py --shape big --steps 200 --warmup 10 | tee /tmp/gpu_check_big.txt \
  || echo "big run failed or timed out; base results follow"
timeout 200 "$PY" bench/gpu_check.py --shape base --steps 300 --warmup 20 --compile \
  | tee /tmp/gpu_check_compiled.txt || echo "compiled run failed or timed out (optional); eager results stand"
timeout 90 "$PY" bench/gpu_check.py --shape base --steps 300 --warmup 20 | tee /tmp/gpu_check_base.txt \
  || { echo "eager base run failed or timed out"; exit 1; }
