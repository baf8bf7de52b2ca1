#!/usr/bin/env bash
# Plan checks named before any of them runs, counted plainly: for the char-LM example and hf:gpt2
# (tiny, seq=65), a plan from ONE base run to the goal, then the plan's best configuration, the
# fixed batch below it and the one above it (`--check best,best-smaller,best-larger`), each at
# SEEDS seeds, run right after the plan printed its predictions:
#
#   bash benchmarks/plan_checks_plain.sh [WORK]      # WORK defaults to build/plan_checks_plain; SEEDS=3
#
# Per workload:
# 1. the base run: as `plan_checks.sh` makes it (its recipe's learning rate, warm-up and
#    validations, its noise scale from 2 micro-batches, one thread, seed 0);
# 2. `trainspeed plan BASE --measure` on cpu:eager:fp32, fixed batches over a grid wide enough to have
#    a batch either side of the best: the bench rows it lacks, the predictions (printed to the
#    .txt), then the three checks at seeds 1000 .. 1000 + SEEDS - 1.
# Rows, what the plan printed and the base run's files go to docs/results/plan_checks_plain_*;
# `python benchmarks/plan_coverage.py` counts them with the others.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/plan_checks_plain}
SEEDS=${SEEDS:-3}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
text_data

plan_and_check() {  # NAME WORKLOAD BATCHES
    local name=$1 workload=$2 batches=$3
    [ -d "$name/checks" ] || "$T" plan "$name/base" --measure --budget-s 600 --measure-dir "$name/measured" \
        --targets cpu:eager:fp32 --devices 1 --global-batches "$batches" --schedules fixed --workload "$workload" \
        --out "$name/plan.jsonl" --check best,best-smaller,best-larger --check-dir "$name/checks" \
        --check-seeds "$SEEDS" > "$name.plan.txt"
    local kept=$RESULTS/plan_checks_plain_$name
    mkdir -p "$kept"
    cp "$name/plan.jsonl" "$kept.jsonl"
    cat "$name.base.txt" "$name.plan.txt" > "$kept.txt"
    cp "$name/base/summary.json" "$name/base/metrics.jsonl" "$name/base/train_config.json" "$kept/"
    cp "$name/measured/bench.jsonl" "$kept/bench.jsonl"
}
mkdir -p charlm gpt2

charlm_base_run charlm/base charlm.base.txt
plan_and_check charlm "$CHARLM" 4,8,16,32,64,128,256

# hf:gpt2: batch 8 at the study's best rate there, as plan_checks.sh runs it
goal_base_run gpt2/base gpt2.base.txt hf:gpt2 tiny,seq=65 data/text 'val/loss<=2.9' 8 40960 1024 1024 1024 \
    --lr 0.004 --lr-scaling sqrt --lr-reference-batch 32
plan_and_check gpt2 hf:gpt2 2,4,8,16,32,64,128
