#!/usr/bin/env bash
# Plan checks of fixed and `auto` configurations, a compiled one each, on tiny Mahjong, the char-LM
# example and hf:gpt2 (tiny, seq=65): each plan made from ONE base run to the goal (no study), what
# it lacks measured by `plan --measure`, and its checks run to the goal right after, so the inputs
# and the checks see the same machine:
#
#   bash benchmarks/plan_checks.sh [WORK]      # WORK defaults to build/plan_checks
#
# Per workload:
# 1. the base run: `trainspeed train --until GOAL --stop-at-target` at the best fixed batch of the
#    committed time-to-target study, with its recipe (learning rate, warm-up, validations), its
#    noise scale from 2 micro-batches, one thread, seed 0;
# 2. `trainspeed plan BASE --measure` on cpu:eager (fixed and auto): the bench rows it lacks; checks of
#    a fixed batch other than the base run's and of auto over the plan's range, on seed 1000;
# 3. `trainspeed plan BASE --measure` on cpu:compile at the base run's batch: its bench rows, a short
#    compiled run (its validation graph), and the check; with torch.compile's caches off
#    (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1), so every command compiles its graphs as the plan counts
#    them, not from the on-disk cache an earlier command of the same shapes filled.
# Each step skips what its outputs already hold; rows, the checks' summaries, a table and a figure go
# to docs/results/plan_checks*.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/plan_checks}
BUDGET=${BUDGET_S:-600}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
study_data

plan_check() {  # NAME PART WORKLOAD TARGET BATCHES SCHEDULES CHECKS
    local name=$1 part=$2 workload=$3 target=$4 batches=$5 schedules=$6 checks=$7 cold=()
    [ "$part" != compile ] || cold=(env TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)
    [ -d "$name/checks_$part" ] || "${cold[@]}" "$T" plan "$name/base" --measure --budget-s "$BUDGET" \
        --measure-dir "$name/measured_$part" --targets "$target" --devices 1 --global-batches "$batches" \
        --schedules "$schedules" --workload "$workload" --out "$name/plan.jsonl" --check "$checks" \
        --check-dir "$name/checks_$part" > "$name.$part.txt"
}

keep() {  # NAME: rows and summaries into docs/results
    local name=$1
    mkdir -p "$RESULTS/plan_checks_$name"
    cp "$name/plan.jsonl" "$RESULTS/plan_checks_$name.jsonl"
    cat "$name".*.txt > "$RESULTS/plan_checks_$name.txt"
    cp "$name/base/summary.json" "$name/base/metrics.jsonl" "$name/base/train_config.json" \
        "$RESULTS/plan_checks_$name/" 2>/dev/null || true
    cat "$name"/measured_*/bench.jsonl > "$RESULTS/plan_checks_$name/bench.jsonl" 2>/dev/null || true
    for run in "$name"/checks_*/*/ "$name"/measured_*/runs/*/; do
        [ -d "$run" ] || continue
        local kept="$RESULTS/plan_checks_$name/$(basename "$(dirname "$run")")/$(basename "$run")"
        mkdir -p "$kept"
        cp "$run/summary.json" "$kept/"
        # a growing batch against samples; a measured run's micro-batches and validations, which the plan reads
        case $run in *auto*|*/runs/*) cp "$run/metrics.jsonl" "$kept/" ;; esac
    done
}
mkdir -p mahjong charlm gpt2

# tiny Mahjong: batch 32 at the study's best rate (0.0003 at 32: 0.0012 at 512 by sqrt)
goal_base_run mahjong/base mahjong.base.txt mahjong tiny data/mahjong 'val/accuracy>=0.85' 32 393216 4096 2048 4096 \
    --lr 0.0012 --lr-scaling sqrt --lr-reference-batch 512
plan_check mahjong eager mahjong cpu:eager:fp32 32,128,2048 fixed,auto \
    "cpu:eager:fp32/1/128,cpu:eager:fp32/1/auto:32..2048"
plan_check mahjong compile mahjong cpu:compile:fp32 32 fixed cpu:compile:fp32/1/32
keep mahjong

# the char-LM example: batch 32 at the study's best rate there (0.0226)
charlm_base_run charlm/base charlm.base.txt
plan_check charlm eager "$CHARLM" cpu:eager:fp32 8,32,512 fixed,auto "cpu:eager:fp32/1/8,cpu:eager:fp32/1/auto:8..512"
plan_check charlm compile "$CHARLM" cpu:compile:fp32 32 fixed cpu:compile:fp32/1/32
keep charlm

# hf:gpt2: batch 8 at the study's best rate there (1e-3 x 4 x sqrt(8/32) = 0.002)
goal_base_run gpt2/base gpt2.base.txt hf:gpt2 tiny,seq=65 data/text 'val/loss<=2.9' 8 40960 1024 1024 1024 \
    --lr 0.004 --lr-scaling sqrt --lr-reference-batch 32
plan_check gpt2 eager hf:gpt2 cpu:eager:fp32 8,32,128 fixed,auto "cpu:eager:fp32/1/32,cpu:eager:fp32/1/auto:8..128"
plan_check gpt2 compile hf:gpt2 cpu:compile:fp32 8 fixed cpu:compile:fp32/1/8
keep gpt2

"$PYTHON" "$REPO/benchmarks/plan_checks_table.py" "$RESULTS"/plan_checks_{mahjong,charlm,gpt2}.jsonl \
    --csv "$RESULTS/plan_checks.csv" --png "$RESULTS/plan_checks.png" > "$RESULTS/plan_checks.md"
