#!/usr/bin/env bash
# Every GPU check of the speed work in one run of under 9 minutes (one H200): base and big at the paper's batch in
# bf16 with fused attention and fused Adam (base eager, with torch.compile, and with the chunked output projection +
# loss of train.loss_chunk_tokens), a torch.profiler table of one base
# step (top kernels; matmul vs elementwise vs idle), and decoding a newstest2014-sized input (3003 sentences, beam
# 4, alpha 0.6, max length + 50) with base, compacting the batch every 8 steps (the GPU default) and every step,
# with the host syncs per decoding step of each. Needs only python3 with torch (lightning for the peak table); nothing
# is installed. The measured MFUs are written into src/aiayn/devices.yaml (the table `python -m aiayn.plan` reads)
# and, when $OUT is set, copied there with the raw logs.
# Prints RESULT mfu_base, mfu_big, decode_newstest_s and, last, mfu_base again (the headline).
# Usage: bash bench/gpu_check.sh            CPU dry run: bash bench/gpu_check.sh --dry-run
# After it, where device time is left: bash bench/gpu_check.sh --levers (under 4 minutes): base compiled with CUDA
# graphs (torch.compile mode reduce-overhead, one graph per batch shape: what train.length_bucket is for); prints
# RESULT mfu_base_cudagraphs. Add --dry-run to either for the CPU flow.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python3}"
LOG="${OUT:-/tmp}/gpu_check"
mkdir -p "$LOG"
"$PY" -c "import torch, lightning; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

result() {  # the value of "RESULT <name> <value>" in a log, or nothing
  { grep -E "^RESULT $2 " "$1" 2>/dev/null || true; } | tail -1 | awk '{print $3}'
}

LEVERS=0; DRY=0
for arg in "$@"; do case "$arg" in --levers) LEVERS=1;; --dry-run) DRY=1;; *) echo "unknown argument $arg"; exit 2;; esac; done
# --dry-run: the same flow on CPU with tiny shapes and a few steps, recording into a copy of the table
BIG=big BASE=base STEPS=300 BIG_STEPS=200 CHUNK_STEPS=200 WARMUP=20 DECODE="--shape base --vocab 37000 --device cuda"
TABLE=src/aiayn/devices.yaml
if [[ $DRY == 1 ]]; then
  BIG=tiny BASE=tiny STEPS=2 BIG_STEPS=2 CHUNK_STEPS=2 WARMUP=1 DECODE="--shape small --vocab 1000 --sentences 16"
  TABLE="$LOG/devices.yaml"; cp src/aiayn/devices.yaml "$TABLE"
fi
if [[ $LEVERS == 1 ]]; then
  timeout 220 "$PY" bench/gpu_check.py --shape $BASE --steps $STEPS --warmup $WARMUP --compile \
    --compile-mode reduce-overhead | tee "$LOG/base_cudagraphs.txt" || echo "CUDA-graph run failed or timed out"
  cudagraphs=$(result "$LOG/base_cudagraphs.txt" ${BASE}_compiled_cudagraphs_mfu)
  echo "RESULT mfu_base_cudagraphs ${cudagraphs:-nan}"
  exit 0
fi
# Time limits (s), 560 in all: big 100, compiled base 170 (compilation included), eager base + profile 90, base
# with the chunked loss 80, decoding (twice) 120.
timeout 100 "$PY" bench/gpu_check.py --shape $BIG --steps $BIG_STEPS --warmup $WARMUP | tee "$LOG/big.txt" \
  || echo "big run failed or timed out; base results follow"
timeout 170 "$PY" bench/gpu_check.py --shape $BASE --steps $STEPS --warmup $WARMUP --compile \
  | tee "$LOG/base_compiled.txt" || echo "compiled run failed or timed out (optional); eager results stand"
timeout 90 "$PY" bench/gpu_check.py --shape $BASE --steps $STEPS --warmup $WARMUP --profile "$LOG/profile_base.txt" \
  | tee "$LOG/base.txt" || { echo "eager base run failed or timed out"; exit 1; }
timeout 80 "$PY" bench/gpu_check.py --shape $BASE --steps $CHUNK_STEPS --warmup $WARMUP --loss-chunk-tokens 8192 \
  | tee "$LOG/base_chunked.txt" || echo "chunked-loss run failed or timed out"
timeout 120 "$PY" bench/decode_speed.py --newstest $DECODE --extra 0 --batch-tokens 4096 --compact-every 8,1 | tee "$LOG/decode.txt" \
  || echo "decoding run failed or timed out"

eager=$(result "$LOG/base.txt" ${BASE}_mfu); compiled=$(result "$LOG/base_compiled.txt" ${BASE}_compiled_mfu)
chunked=$(result "$LOG/base_chunked.txt" ${BASE}_chunked_mfu)
big=$(result "$LOG/big.txt" ${BIG}_mfu); decode=$(result "$LOG/decode.txt" decode_newstest_s)
decode1=$(result "$LOG/decode.txt" decode_newstest_s_compact1)
base=$("$PY" -c "import sys; v = [float(x) for x in sys.argv[1:] if x]; print(max(v) if v else '')" \
  "$eager" "$compiled" "$chunked")
name=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')")
stamp="$(date +%Y-%m-%d), bench/gpu_check.sh (bf16, paper batch, $("$PY" -c 'import torch; print(torch.__version__)'))"
if [[ -n "$base" ]]; then "$PY" -m aiayn.devices "$name" base "$base" "$stamp" "$TABLE"
else echo "base MFU not recorded"; fi
if [[ -n "$big" ]]; then "$PY" -m aiayn.devices "$name" big "$big" "$stamp (eager)" "$TABLE"
else echo "big MFU not recorded"; fi
if [[ -n "${OUT:-}" ]]; then cp "$TABLE" "$OUT/devices.yaml"; fi
echo "base MFU: eager ${eager:-?}, compiled ${compiled:-?}, chunked loss ${chunked:-?}"
echo "decoding newstest: ${decode:-?} s compacting every 8 steps, ${decode1:-?} s every step"
echo "profile of one base step: $LOG/profile_base.txt"
head -40 "$LOG/profile_base.txt" 2>/dev/null || true
echo "RESULT mfu_base ${base:-nan}"
echo "RESULT mfu_big ${big:-nan}"
echo "RESULT decode_newstest_s ${decode:-nan}"
echo "RESULT mfu_base ${base:-nan}"
