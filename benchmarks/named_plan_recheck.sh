#!/usr/bin/env bash
# The committed plan of hf:gpt2 (tiny, seq=65) planned again from its committed inputs (the study,
# bench rows and 1-rank runs `named_models.sh` made) and checked where this runs: the plan's pick
# and the configuration samples/s alone would pick, each run to the goal at SEEDS seeds. Before a
# configuration's first run its bench row is measured again (`plan --check-rebench`), so each check
# also stands beside the prediction at the machine's speed now (docs/time_to_target.md says how):
#
#   bash benchmarks/named_plan_recheck.sh [WORK]   # WORK defaults to build/named_plan_recheck; SEEDS=3
#
# The inputs are copied into WORK at the paths their rows record (ttt_gpt2/, plan_gpt2/), the study's
# data made as named_models.sh makes it. torch.compile's caches are off (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1),
# so every command compiles its graphs as the plan counts them. The rows replace
# docs/results/named_plan_gpt2{.jsonl,.txt,.png,.svg} and the check runs in docs/results/named_plan_gpt2/checks.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/named_plan_recheck}
SEEDS=${SEEDS:-3}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
text_data

mkdir -p ttt_gpt2 plan_gpt2/runs
cp "$RESULTS/named_time_to_target_gpt2.jsonl" ttt_gpt2/time_to_target.jsonl
cp "$RESULTS/named_plan_bench_gpt2.jsonl" plan_gpt2/bench.jsonl
cp -r "$RESULTS"/named_plan_gpt2/runs/* plan_gpt2/runs/
export TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
[ -d plan_gpt2/checks ] || "$T" plan plan_gpt2/bench.jsonl plan_gpt2/runs/* ttt_gpt2 --devices 1 \
    --out plan_gpt2/plan.jsonl --check best,samples-per-s --check-dir plan_gpt2/checks --check-seeds "$SEEDS" \
    --check-rebench > plan_gpt2/plan.txt

kept=$RESULTS/named_plan_gpt2
cp plan_gpt2/plan.jsonl "$kept.jsonl"
cp plan_gpt2/plan.txt "$kept.txt"
rm -rf "$kept/checks"
keep_runs "$kept" plan_gpt2/ plan_gpt2/checks/*/ plan_gpt2/checks/*/seed-*/
cp plan_gpt2/checks/rebench-*.jsonl "$kept/checks/"
"$T" plot "$kept.jsonl" > /dev/null
