#!/usr/bin/env bash
# Every GPU check of the speed work (issue 14) in one call that fits a short GPU lease with room for a rerun.
#
# Parts, most important first (each its own process, its own time limit, and the RESULT line that marks it done):
#   base             base at the paper's batch (25k + 25k tokens), bf16, fused attention and Adam, eager; then a
#                    torch.profiler table of three steps (top kernels; matmul vs attention vs elementwise vs idle)
#   big              big, the same way
#   decode           a newstest2014-sized input (3003 sentences, beam 4, alpha 0.6, max length + 50) with base,
#                    compacting the batch every 8 steps (the GPU default), and its host syncs per decoding step
#   base_compiled    base with torch.compile of the model and the loss together (as train.compile)
#   base_chunked     base with the chunked output projection + loss (train.loss_chunk_tokens)
#   decode_compact1  the same decoding, compacting every step
#   base_cudagraphs  base compiled with CUDA graphs (mode reduce-overhead, one graph per batch shape: what
#                    train.length_bucket is for)
# Needs only python3 with torch and lightning (the GPU image has no Hydra, DVC or wandb, and needs none here).
#
# --budget S (default 420): the parts share S seconds. A part starts only with at least 30 s left and gets at most
# what is left (after 10 s kept for the summary), so the call ends inside S + a few seconds whatever hangs. On a
# lease of 15 minutes of which starting the machine takes one or two, a 7-minute call leaves room for a second.
# Resumable: each part's log is kept in gpu/out/gpu_check/ (ignored by git; it stays on the machine while it is
# warm) and a part whose kept log holds its RESULT line, made by the same code, is not run again. So the same
# command again finishes what a budget or a failure left undone, and only that. --fresh drops the kept logs.
#
# Results: RESULT mfu_base, mfu_big, decode_newstest_s and, last, mfu_base again (the headline: the best base MFU
# of eager, compiled, chunked and CUDA graphs). The measured MFUs are written into src/aiayn/cost/devices.yaml (the table
# `python -m aiayn.cost.plan` reads). With $OUT set, it gets gpu_check.txt (every part's log and the summary),
# profile_base.txt and devices.yaml: three files, inside what the device tool brings back.
#
# Usage: OUT=<dir> bash gpu/gpu_check.sh [--budget S] [--part-limit S] [--only part,part] [--fresh] [--dry-run]
#        (--part-limit caps each part's own time limit: a quick first pass; a part it cuts is not done)
#        (--levers is --only base_cudagraphs). The device tool's call:
#   run(command="bash gpu/gpu_check.sh", timeout_s=480)   # $OUT is set there; on status 1, the same call again
# CPU dry run (tiny shapes, a few steps, a copy of the table, logs kept under $OUT or /tmp): --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"

BUDGET=420; PART_LIMIT=0; ONLY=""; FRESH=0; DRY=0
while (( $# )); do
  case "$1" in
    --budget) BUDGET="$2"; shift;;
    --part-limit) PART_LIMIT="$2"; shift;;
    --only) ONLY="$2"; shift;;
    --levers) ONLY=base_cudagraphs;;
    --fresh) FRESH=1;;
    --dry-run) DRY=1;;
    *) echo "unknown argument $1 (--budget S, --part-limit S, --only part[,part], --levers, --fresh, --dry-run)"; exit 2;;
  esac
  shift
done
[[ "$BUDGET" =~ ^[0-9]+$ ]] || { echo "--budget takes whole seconds, got '$BUDGET'"; exit 2; }
[[ "$PART_LIMIT" =~ ^[0-9]+$ ]] || { echo "--part-limit takes whole seconds, got '$PART_LIMIT'"; exit 2; }
DEADLINE=$((SECONDS + BUDGET)); RESERVE=10; MIN_START=30

# What the parts need, checked before any runs; the device's name and torch's version for devices.yaml.
IFS=$'\t' read -r NAME TORCH < <("$PY" -c "import sys, torch, lightning
print('torch', torch.__version__, 'lightning', lightning.__version__, 'cuda', torch.cuda.is_available(), file=sys.stderr)
print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu', torch.__version__, sep='\t')") || true
[[ -n "$TORCH" ]] || { echo "python3 with torch and lightning is needed (PYTHON=$PY)"; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

BIG=big BASE=base STEPS=160 WARMUP=20 DECODE="--shape base --vocab 37000 --device cuda"
KEEP="${GPU_CHECK_KEEP:-gpu/out/gpu_check}"; TABLE=src/aiayn/cost/devices.yaml
if [[ $DRY == 1 ]]; then  # the same flow on CPU: tiny shapes, a few steps, a copy of the table
  BIG=tiny BASE=tiny STEPS=2 WARMUP=1 DECODE="--shape small --vocab 1000 --sentences 16" MIN_START=0
  KEEP="${GPU_CHECK_KEEP:-${OUT:-/tmp}/gpu_check_dry}"
fi
mkdir -p "$KEEP"
[[ $FRESH == 1 ]] && rm -f "$KEEP"/*.txt
if [[ $DRY == 1 ]]; then
  TABLE="$KEEP/devices.yaml"; [[ -f "$TABLE" ]] || cp src/aiayn/cost/devices.yaml "$TABLE"
fi
# Kept logs count only when made by this code: the sources the parts run, hashed.
CODE=$(cat $(find gpu bench src/aiayn -name '*.py' | LC_ALL=C sort) | sha1sum | cut -c1-12)

result() {  # the value of "RESULT <name> <value>" in a log, or nothing
  { grep -E "^RESULT $2 " "$1" 2>/dev/null || true; } | tail -1 | awk '{print $3}'
}

ORDER=(); DONE=(); LEFT=()
part() {  # part NAME LIMIT_S RESULT_KEY COMMAND...: run COMMAND into $KEEP/NAME.txt unless done, within the budget
  local name=$1 limit=$2 key=$3; shift 3
  (( PART_LIMIT > 0 && PART_LIMIT < limit )) && limit=$PART_LIMIT
  ORDER+=("$name")
  if [[ -n "$ONLY" && ",$ONLY," != *",$name,"* ]]; then return 0; fi
  local log="$KEEP/$name.txt" stamp="# gpu_check part $name, code $CODE: $*"
  if [[ -f "$log" && "$(head -1 "$log")" == "$stamp" && -n "$(result "$log" "$key")" ]]; then
    echo "== $name: done in an earlier call (kept log $log), not run again"; DONE+=("$name"); return 0
  fi
  local left=$((DEADLINE - SECONDS - RESERVE))
  if (( left < MIN_START || left <= 0 )); then
    echo "== $name: not started, ${left} s left of the ${BUDGET} s budget"; LEFT+=("$name"); return 0
  fi
  local t=$(( limit < left ? limit : left )) start=$SECONDS
  echo "== $name: up to ${t} s ($*)"
  echo "$stamp" > "$log"
  timeout "$t" "$@" 2>&1 | tee -a "$log" || echo "$name failed or timed out (limit ${t} s)" | tee -a "$log"
  echo "== $name: $((SECONDS - start)) s" | tee -a "$log"
  if [[ -n "$(result "$log" "$key")" ]]; then DONE+=("$name"); else LEFT+=("$name"); fi
}

G="gpu/gpu_check.py --steps $STEPS --warmup $WARMUP"
part base 100 "${BASE}_ms_per_step" "$PY" $G --shape $BASE --profile "$KEEP/profile_base.txt"
part big 100 "${BIG}_ms_per_step" "$PY" $G --shape $BIG
part decode 80 decode_newstest_s "$PY" bench/decode_speed.py --newstest $DECODE --extra 0 --batch-tokens 4096 \
  --compact-every 8
part base_compiled 170 "${BASE}_compiled_ms_per_step" "$PY" $G --shape $BASE --compile
part base_chunked 70 "${BASE}_chunked_ms_per_step" "$PY" $G --shape $BASE --loss-chunk-tokens 8192
part decode_compact1 80 decode_newstest_s "$PY" bench/decode_speed.py --newstest $DECODE --extra 0 \
  --batch-tokens 4096 --compact-every 1
part base_cudagraphs 200 "${BASE}_compiled_cudagraphs_ms_per_step" "$PY" $G --shape $BASE --compile \
  --compile-mode reduce-overhead

# Summary: from the kept logs, this call's and earlier ones'.
eager=$(result $KEEP/base.txt ${BASE}_mfu); compiled=$(result $KEEP/base_compiled.txt ${BASE}_compiled_mfu)
chunked=$(result $KEEP/base_chunked.txt ${BASE}_chunked_mfu)
cudagraphs=$(result $KEEP/base_cudagraphs.txt ${BASE}_compiled_cudagraphs_mfu)
big=$(result $KEEP/big.txt ${BIG}_mfu); decode=$(result $KEEP/decode.txt decode_newstest_s)
decode1=$(result $KEEP/decode_compact1.txt decode_newstest_s)
best=$("$PY" -c "import sys; v = [(float(x), k) for k, x in zip(sys.argv[1::2], sys.argv[2::2]) if x]
print(*max(v) if v else '')" eager "$eager" compiled "$compiled" "chunked loss" "$chunked" "CUDA graphs" "$cudagraphs")
base=${best%% *}; how=${best#* }
stamp="$(date +%Y-%m-%d), gpu/gpu_check.sh (bf16, paper batch, torch $TORCH"
{
  if [[ -n "$base" ]]; then "$PY" -m aiayn.cost.devices "$NAME" base "$base" "$stamp, $how)" "$TABLE"
  else echo "base MFU not recorded"; fi
  if [[ -n "$big" ]]; then "$PY" -m aiayn.cost.devices "$NAME" big "$big" "$stamp, eager)" "$TABLE"
  else echo "big MFU not recorded"; fi
  echo "base MFU: eager ${eager:-?}, compiled ${compiled:-?}, chunked loss ${chunked:-?}, CUDA graphs ${cudagraphs:-?}"
  echo "big MFU: ${big:-?}"
  echo "decoding newstest: ${decode:-?} s compacting every 8 steps, ${decode1:-?} s every step"
  for name in "${ORDER[@]}"; do  # each part's other RESULT lines
    [[ -f "$KEEP/$name.txt" ]] && { grep -E "^RESULT " "$KEEP/$name.txt" | sed "s|^|$name: |" || true; }
  done
  echo "parts done: ${DONE[*]:-none}"
  if (( ${#LEFT[@]} )); then
    echo "parts not done: ${LEFT[*]}: run the same command again (while the machine is warm, kept logs skip the rest)"
  fi
  echo "profile of one base step ($KEEP/profile_base.txt):"
  head -40 "$KEEP/profile_base.txt" 2>/dev/null || echo "(none)"
} | tee "$KEEP/summary.txt"
if [[ -n "${OUT:-}" ]]; then  # three files: the device tool brings back at most eight
  mkdir -p "$OUT"
  for name in "${ORDER[@]}" summary; do
    [[ -f "$KEEP/$name.txt" ]] && { echo "######## $name"; cat "$KEEP/$name.txt"; }
  done > "$OUT/gpu_check.txt"
  [[ -f "$KEEP/profile_base.txt" ]] && cp "$KEEP/profile_base.txt" "$OUT/"
  cp "$TABLE" "$OUT/devices.yaml"
fi
for kind in eager compiled chunked cudagraphs; do echo "RESULT mfu_base_$kind ${!kind:-nan}"; done
echo "RESULT decode_newstest_s_compact1 ${decode1:-nan}"
echo "RESULT mfu_base ${base:-nan}"
echo "RESULT mfu_big ${big:-nan}"
echo "RESULT decode_newstest_s ${decode:-nan}"
echo "RESULT mfu_base ${base:-nan}"
(( ${#LEFT[@]} == 0 ))  # the status: 0 when every part asked for is done, else 1 (the same command finishes them)
