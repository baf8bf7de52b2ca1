#!/usr/bin/env bash
# The committed time-to-target run directories (docs/results/time_to_target_*/): tiny Mahjong to 85%
# validation accuracy on 1 rank (noise scale from 4 micro-batches), on 2 ranks (from each rank's
# gradient), and on 1 rank killed with kill -9 after a checkpoint and resumed.
#
#   bash benchmarks/time_to_target_runs.sh [PREFIX]   # PREFIX defaults to docs/results/time_to_target
#
# Run R goes to PREFIX_R with its summary.json, metrics.jsonl and resumes.jsonl; its settings,
# checkpoints, TensorBoard files and logs are left out (they name scratch paths, or are large).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/results/time_to_target}
TRAINSPEED=${TRAINSPEED:-.venv/bin/trainspeed}
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

"$TRAINSPEED" data mahjong-selfplay --games 60 --workers 1 --out "$SCRATCH/data" --seed 0 --no-progress
COMMON=(--workload mahjong --size tiny --data "$SCRATCH/data" --steps 1500 --eval-every-samples 8192 --eval-batches 8
        --until 'val/accuracy>=0.85' --stop-at-target --log-every 16 --threads 1 --num-workers 1 --no-progress)

"$TRAINSPEED" train "${COMMON[@]}" --batch-size-per-device 64 --noise-scale-micro-batches 4 --out "$SCRATCH/one_rank"
"$TRAINSPEED" train "${COMMON[@]}" --batch-size-per-device 32 --nproc 2 --out "$SCRATCH/two_ranks"

# Killed: checkpoints every 96 steps; the kill comes once a window after the checkpoint of step 192
# is logged, so the steps after it are trained again, and their seconds are counted as lost.
KILLED=(train "${COMMON[@]}" --batch-size-per-device 64 --checkpoint-every 96 --out "$SCRATCH/killed_resumed")
"$TRAINSPEED" "${KILLED[@]}" &
PID=$!
until [ -f "$SCRATCH/killed_resumed/checkpoints/step-000000192.pt" ] \
      && grep -q '"step": 2[0-9][0-9],' "$SCRATCH/killed_resumed/metrics.jsonl" 2>/dev/null; do
    sleep 0.2
done
kill -9 "$PID"
wait "$PID" || true
"$TRAINSPEED" "${KILLED[@]}" --resume

for run in one_rank two_ranks killed_resumed; do
    rm -rf "${OUT:?}_$run"
    mkdir -p "${OUT}_$run"
    for file in summary.json metrics.jsonl resumes.jsonl; do
        if [ -f "$SCRATCH/$run/$file" ]; then
            cp "$SCRATCH/$run/$file" "${OUT}_$run/"
        fi
    done
done
echo "time-to-target runs in ${OUT}_*"
