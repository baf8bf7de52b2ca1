#!/usr/bin/env bash
# Before/after measurements of the speed variants in docs/results/gpu_speed.md, on one GPU: the
# Mahjong policy's switches on today's best target, its attention backends at 34 tokens, the
# max-autotune target; StyleGAN3 T-256 at batch 32 plain vs channels_last + cudnn.benchmark vs
# the fused Triton filtered leaky ReLU, after a per-layer check of that kernel against the plain ops.
#
# Usage on the GPU host, from the repository root:   OUT=/some/dir bash benchmarks/gpu_speed.sh
#   GPU_SPEED_STAGES=a,b   run only these stages (default: all, in the order of STAGES below)
#   GPU_SPEED_BUDGET_S=N   skip a stage whose cap would end it later than N s after the start
#                          (default 480: the run ends within 8 minutes; skipped stages are logged
#                          with the command to run them)
#   GPU_SPEED_DRY_RUN=1    the same stages with CPU targets and tiny sizes (checks this script on a
#                          host without a GPU; its numbers mean nothing)
# Each stage runs under its own `timeout`; every script appends rows as it measures, so a capped
# stage keeps what it measured. Rows: $OUT/*.jsonl; stage logs: $OUT/logs/; the summary of every
# stage: $OUT/gpu_speed.log; the tables: $OUT/gpu_speed_table.md.
set -u
OUT=${OUT:-results/gpu_speed}
mkdir -p "$OUT/logs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
LOG="$OUT/gpu_speed.log"
START=$(date +%s)
STAGES=${GPU_SPEED_STAGES:-mahjong,stylegan3-check,stylegan3,stylegan3-cudnn,mahjong-each,attention,mahjong-large,autotune}

if [ "${GPU_SPEED_DRY_RUN:-0}" = 1 ]; then
  BUDGET=${GPU_SPEED_BUDGET_S:-3600}
  MJ=tiny; MJ_FAST=tiny+bf16-stream+pad-matmuls; MJ_TARGET=cpu:eager:bf16; MJ_AUTOTUNE=cpu:eager:bf16
  MJ_SMALL=8; MJ_LARGE=16; MJ_HUGE=32
  MJ_TIMING=(--windows 1 --min-window-s 0.01 --warmup-steps 1 --threads 2)
  SG_CASE=tiny-t:2; SG_TARGET=cpu:eager:fp32; SG_TARGET_CUDNN=cpu:eager:fp32; SG_STEPS=1
  TL_ENV=(env TRITON_INTERPRET=1)  # Triton's interpreter runs the kernels on the host
  TL_ARGS=(--size tiny-t --device cpu --batch 1 --max-channels 2 --max-layers 2 --repeats 1)
  ATTN_ARGS=(--device cpu --batch 8 --size tiny --dtype fp32 --repeats 2)
else
  BUDGET=${GPU_SPEED_BUDGET_S:-480}
  MJ=base; MJ_FAST=base-fast; MJ_TARGET=cuda:cudagraphs:bf16; MJ_AUTOTUNE=cuda:max-autotune:bf16
  MJ_SMALL=256; MJ_LARGE=4096; MJ_HUGE=16384
  MJ_TIMING=(--windows 3 --min-window-s 0.2)
  SG_CASE=t256:32; SG_TARGET=cuda:eager:bf16; SG_TARGET_CUDNN=cuda:eager:bf16:cudnn-benchmark; SG_STEPS=2
  TL_ENV=(env)
  TL_ARGS=(--size t256 --device cuda --batch 4 --dtypes bf16 --repeats 5)  # fp32 kernels take long to compile
  ATTN_ARGS=(--device cuda --batch 4096 --size base --dtype bf16 --repeats 20)
fi
MJ_EACH=$MJ+bf16-stream,$MJ+pad-matmuls,$MJ+attn-explicit,$MJ+attn-sdpa-math,$MJ+attn-sdpa-efficient,$MJ+attn-sdpa-cudnn,$MJ+compiled-adamw
BENCH=(--workload mahjong --no-progress --no-plot "${MJ_TIMING[@]}")

want() { case ",$STAGES," in *",$1,"*) return 0 ;; esac; return 1; }

stage() {  # stage NAME CAP_SECONDS COMMAND...
  local name=$1 cap=$2
  shift 2
  want "$name" || return 0
  local begin elapsed rc
  begin=$(date +%s)
  elapsed=$((begin - START))
  if [ $((elapsed + cap)) -gt "$BUDGET" ]; then
    echo "== $name: skipped at ${elapsed}s, its cap of ${cap}s would pass the ${BUDGET}s budget;" \
      "run it with GPU_SPEED_STAGES=$name" | tee -a "$LOG"
    return 0
  fi
  echo "== $name (cap ${cap}s, at ${elapsed}s): $*" | tee -a "$LOG"
  timeout -k 10 "$cap" "$@" >"$OUT/logs/$name.log" 2>&1
  rc=$?
  tail -n 30 "$OUT/logs/$name.log" | tee -a "$LOG"
  echo "== $name: exit $rc$([ "$rc" = 124 ] && echo ' (time cap)') after $(($(date +%s) - begin))s" | tee -a "$LOG"
}

{
  echo "gpu_speed.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) dry_run=${GPU_SPEED_DRY_RUN:-0} stages=$STAGES budget=${BUDGET}s"
  git log -1 --format='commit %H' 2>/dev/null
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  $PY -c "import torch; print('torch', torch.__version__)"
  $PY -c "import triton; print('triton', triton.__version__)" 2>/dev/null || echo "triton: not installed"
} 2>&1 | tee -a "$LOG"

# Mahjong base on today's best target (cuda:cudagraphs:bf16): the plain model vs base-fast
stage mahjong 120 $PY benchmarks/bench_sizes.py --sizes "$MJ,$MJ_FAST" -- "${BENCH[@]}" \
  --targets "$MJ_TARGET" --batch-sizes "$MJ_SMALL,$MJ_LARGE" --out "$OUT/mahjong_speed.jsonl"
# the fused filtered leaky ReLU against the plain ops, per T-256 layer (values, gradients, time)
stage stylegan3-check 90 "${TL_ENV[@]}" $PY benchmarks/check_triton_lrelu.py "${TL_ARGS[@]}" \
  --out "$OUT/triton_lrelu.jsonl"
# StyleGAN3 T-256 batch 32: plain ops vs the fused kernel, then both with channels_last + cudnn.benchmark
stage stylegan3 120 $PY benchmarks/bench_stylegan3.py --target "$SG_TARGET" --cases "$SG_CASE" \
  --variants activation,triton --windows "$SG_STEPS" --out "$OUT/stylegan3_speed.jsonl"
stage stylegan3-cudnn 120 $PY benchmarks/bench_stylegan3.py --target "$SG_TARGET_CUDNN" --cases "$SG_CASE" \
  --variants activation+channels-last,triton+channels-last --windows "$SG_STEPS" --out "$OUT/stylegan3_speed.jsonl"
# each Mahjong switch alone at the large batch, same target
stage mahjong-each 150 $PY benchmarks/bench_sizes.py --sizes "$MJ_EACH" -- "${BENCH[@]}" \
  --targets "$MJ_TARGET" --batch-sizes "$MJ_LARGE" --out "$OUT/mahjong_speed.jsonl"
# which SDPA backend runs at 34 tokens, and each one's time
stage attention 40 $PY benchmarks/mahjong_attention.py "${ATTN_ARGS[@]}" --out "$OUT/mahjong_attention.jsonl"
stage mahjong-large 60 $PY benchmarks/bench_sizes.py --sizes "$MJ,$MJ_FAST" -- "${BENCH[@]}" \
  --targets "$MJ_TARGET" --batch-sizes "$MJ_HUGE" --out "$OUT/mahjong_speed.jsonl"
# Inductor's autotuned Triton matmuls (fused epilogues) under CUDA graphs; minutes to compile
stage autotune 180 $PY -m trainspeed bench --size "$MJ_FAST" "${BENCH[@]}" \
  --targets "$MJ_AUTOTUNE" --batch-sizes "$MJ_LARGE,$MJ_SMALL" --out "$OUT/mahjong_speed.jsonl"

$PY benchmarks/gpu_speed_table.py --mahjong "$OUT/mahjong_speed.jsonl" --stylegan3 "$OUT/stylegan3_speed.jsonl" \
  --attention "$OUT/mahjong_attention.jsonl" --triton "$OUT/triton_lrelu.jsonl" \
  --mahjong-baseline "$MJ_TARGET" --mahjong-baseline-size "$MJ" --stylegan3-baseline "$SG_TARGET" --out "$OUT/gpu_speed_table.md" >/dev/null
echo "== done after $(($(date +%s) - START))s; tables in $OUT/gpu_speed_table.md" | tee -a "$LOG"
ls -la "$OUT" | tee -a "$LOG"
