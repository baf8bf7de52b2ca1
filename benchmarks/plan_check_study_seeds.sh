#!/usr/bin/env bash
# A plan of hf:gpt2 (tiny, seq=65) from a time-to-target study of it, on cpu:eager and
# cpu:compile at batches 8, 32 and 128, checked at several seeds (`plan --check-seeds`): the plan's
# pick, the configuration samples/s alone would pick and compiled batch 128, each run to the goal at
# SEEDS seeds, the mean of their runs set beside the prediction:
#
#   bash benchmarks/plan_check_study_seeds.sh [WORK]   # WORK defaults to build/plan_check_study_seeds; SEEDS=3
#
# The study is made first, as `named_models.sh` makes it (`gpt2_time_to_target_study`); then
# `plan --measure` measures what the study does not give (the bench rows, a short run of one device,
# a short compiled run at each batch for its validation graph) and the checks run right after, so
# the step times and the checks see the same machine; the steps come from the study's fit. torch.compile's
# caches are off (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1), so every command compiles its graphs as the
# plan counts them. Rows, the plan's output and the measured bench rows go to
# docs/results/plan_check_study_seeds_gpt2*.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/plan_check_study_seeds}
SEEDS=${SEEDS:-3}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
study_data

gpt2_time_to_target_study ttt_gpt2
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
[ -d checks ] || "$T" plan ttt_gpt2 --measure --budget-s 900 --measure-dir measured \
    --targets cpu:eager:fp32,cpu:compile:fp32 --devices 1 --global-batches 8,32,128 --out plan.jsonl \
    --check best,samples-per-s,cpu:compile:fp32/1/128 --check-dir checks --check-seeds "$SEEDS" > plan.txt

kept=$RESULTS/plan_check_study_seeds_gpt2
mkdir -p "$kept"
cp plan.jsonl "$kept.jsonl"
cp plan.txt "$kept.txt"
cp ttt_gpt2/time_to_target.jsonl "$kept/time_to_target.jsonl"
cp measured/bench.jsonl "$kept/bench.jsonl"
keep_runs "$kept" "" measured/runs/*/ checks/*/ checks/*/seed-*/
"$T" plot "$kept.jsonl" > /dev/null
