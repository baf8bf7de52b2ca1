#!/usr/bin/env bash
# The TPU training runs' goal, on this machine's CPU, side by side with the committed TPU rows:
# tiny Mahjong on the same 200 self-play games (seed 0) to 85% validation accuracy, with the flags
# of benchmarks/tpu_train.sh (batch 64 and 256, a validation every 8,192 samples on 8 batches),
#   - the torch trainer on `cpu:eager:fp32` with the meter off (the exported steps carry none),
#   - the same steps exported for this CPU (`train --exported`, JAX on the CPU),
# each run after the other, nothing else beside them, all cores:
#
#   bash benchmarks/cpu_same_goal.sh [WORK]     # WORK defaults to build/cpu_same_goal
#
# -> docs/results/cpu_train_mahjong_tiny_{eager,exported}_{b64,b256}/ (summary.json, metrics.jsonl)
#    and docs/results/tpu_vs_cpu_same_goal.{jsonl,md}: seconds to the goal of each, and the TPU's
#    ratio to each CPU run at the same batch.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/cpu_same_goal}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
THREADS=${THREADS:-$(nproc)}
RESULTS=$REPO/docs/results
T=("$PYTHON" -m trainspeed)
mkdir -p "$WORK"
cd "$WORK"

# The games of the TPU runs: carried there as .tpu-train/selfplay200.tgz, made here as it was made.
if [ ! -f selfplay200/index.json ]; then
    if [ -f "$REPO/.tpu-train/selfplay200.tgz" ]; then
        tar xzf "$REPO/.tpu-train/selfplay200.tgz"
    else
        "${T[@]}" data mahjong-selfplay --games 200 --workers 2 --seed 0 --no-progress --out selfplay200
    fi
fi
[ -f exported_cpu/manifest.json ] || "${T[@]}" export --workload mahjong --size tiny --target jax:jit:fp32 \
    --platform cpu --batch-sizes 64,256 --out exported_cpu

GOAL=(--steps 1500 --eval-every-samples 8192 --eval-batches 8 --until 'val/accuracy>=0.85' --stop-at-target
      --log-every 16 --no-progress --data selfplay200)
for batch in 64 256; do
    out=eager_b$batch
    [ -f $out/summary.json ] || "${T[@]}" train --workload mahjong --size tiny --target cpu:eager:fp32 \
        --threads "$THREADS" --noise-scale off "${GOAL[@]}" --batch-size-per-device $batch --out $out
    out=exported_b$batch
    [ -f $out/summary.json ] || "${T[@]}" train --exported exported_cpu "${GOAL[@]}" --batch-size-per-device $batch \
        --out $out
done

for run in eager_b64 eager_b256 exported_b64 exported_b256; do
    mkdir -p "$RESULTS/cpu_train_mahjong_tiny_$run"
    cp $run/summary.json $run/metrics.jsonl "$RESULTS/cpu_train_mahjong_tiny_$run/"
done
"$PYTHON" "$REPO/benchmarks/same_goal_table.py" "$RESULTS" > "$RESULTS/tpu_vs_cpu_same_goal.md"
cat "$RESULTS/tpu_vs_cpu_same_goal.md"
