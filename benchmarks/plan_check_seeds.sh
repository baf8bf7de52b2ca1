#!/usr/bin/env bash
# A plan from one base run of the char-LM example (no study), checked at several seeds: the check a
# single seed makes scatters about the prediction as one run's steps do, so each checked
# configuration runs at SEEDS seeds (`plan --check-seeds`) and the mean of its runs is set beside
# the prediction:
#
#   bash benchmarks/plan_check_seeds.sh [WORK]      # WORK defaults to build/plan_check_seeds; SEEDS=5
#
# 1. the base run: as `plan_checks.sh` makes it (batch 32 at the committed study's best rate, its
#    noise scale from 2 micro-batches, one thread, seed 0);
# 2. `trainspeed plan BASE --measure` on cpu:eager, fixed and auto over 8..512: the bench rows it
#    lacks; checks of batch 8 and of auto 8..512 at seeds 1000 to 1000 + SEEDS - 1, right after.
# Rows, the plan's output and the base run's files go to docs/results/plan_check_seeds_charlm*.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/plan_check_seeds}
SEEDS=${SEEDS:-5}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
study_data

charlm_base_run base base.txt
[ -d checks ] || "$T" plan base --measure --budget-s 600 --measure-dir measured --targets cpu:eager:fp32 --devices 1 \
    --global-batches 8,32,512 --schedules fixed,auto --workload "$CHARLM" --out plan.jsonl \
    --check cpu:eager:fp32/1/8,cpu:eager:fp32/1/auto:8..512 --check-dir checks --check-seeds "$SEEDS" > plan.txt

kept=$RESULTS/plan_check_seeds_charlm
mkdir -p "$kept"
cp plan.jsonl "$kept.jsonl"
cat base.txt plan.txt > "$kept.txt"
cp base/summary.json base/metrics.jsonl base/train_config.json "$kept/"
cp measured/bench.jsonl "$kept/bench.jsonl"
