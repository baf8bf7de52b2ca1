#!/usr/bin/env bash
# The committed time-to-target studies, plans and checks (docs/results/time_to_target_study_*.jsonl,
# plan_*), on tiny Mahjong to 85% validation accuracy and on the char-LM example to 3.6 bits per
# character, each run in a work folder with the relative paths the rows record:
#
#   bash benchmarks/time_to_target_plan.sh [WORK]      # WORK defaults to build/time_to_target
#
# 1. the data: 200 self-play games (seed 0); the first 200 standard-library sources as bytes;
# 2. `trainspeed study time-to-target` on each (4 global batches x 3 seeds, the LR tuned per batch);
# 3. the plan's inputs, on an otherwise idle machine: one bench run of the targets at every
#    per-device batch, and short runs of 1 and 2 ranks (their efficiency against the bench);
# 4. `trainspeed plan` with its check: the recommended configuration, the one samples/s alone
#    picks and a third, each run to the goal on seed 1000;
# 5. the H200 plan of Mahjong base from the committed H200 bench rows (a prediction, no check).
# Each step skips what its outputs already hold; the results are copied into docs/results.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/time_to_target}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
study_data

[ -f tt_mahjong/time_to_target.jsonl ] || "$T" study time-to-target --preset full --workload mahjong --size tiny \
    --data data/mahjong --until 'val/accuracy>=0.85' --global-batches 32,128,512,2048 --seeds 3 --lr-factors 1,2,4 \
    --max-samples 393216 --eval-every-samples 4096 --val-samples 2048 --warmup-samples 4096 --threads 1 \
    --parallel-runs 2 --no-progress --out tt_mahjong
[ -f tt_charlm/time_to_target.jsonl ] || "$T" study time-to-target --preset full --workload "$CHARLM" --size tiny \
    --data data/text --until 'val/bits_per_char<=3.6' --global-batches 8,32,128,512 --seeds 3 --lr-factors 0.5,1,2 \
    --reference-batch 64 --max-lr-extensions 6 --max-samples 262144 --eval-every-samples 2048 --val-samples 1024 --warmup-samples 2048 \
    --threads 1 --parallel-runs 2 --no-progress --out tt_charlm

plan_inputs() {  # NAME WORKLOAD DATA BATCHES COMPILED ONE_RANK TWO_RANKS: the bench, and runs of 1 and 2 ranks
    # at every per-device batch of the plan's global batches (their efficiency against the bench)
    local name=$1 workload=$2 data=$3 batches=$4 compiled=$5 one_rank=$6 two_ranks=$7
    [ -f "plan_$name/bench.jsonl" ] || "$T" bench --workload "$workload" --size tiny --targets cpu:eager:fp32 \
        --batch-sizes "$batches" --threads 1 --windows 3 --min-window-s 0.5 --no-progress --no-plot \
        --out "plan_$name/bench.jsonl"
    grep -q cpu:compile "plan_$name/bench.jsonl" || "$T" bench --workload "$workload" --size tiny \
        --targets cpu:compile:fp32 --batch-sizes "$compiled" --threads 1 --windows 3 --min-window-s 0.5 --no-progress \
        --no-plot --out "plan_$name/bench.jsonl"
    for ranks in 1 2; do
        local run_batches=$one_rank
        [ "$ranks" = 1 ] || run_batches=$two_ranks
        for batch in ${run_batches//,/ }; do
            local out="plan_$name/runs/ranks$ranks-b$batch" steps=$(( 16384 / batch ))
            steps=$(( steps > 120 ? 120 : (steps < 20 ? 20 : steps) ))
            [ -f "$out/summary.json" ] || "$T" train --workload "$workload" --size tiny --data "$data" --nproc "$ranks" \
                --threads 1 --batch-size-per-device "$batch" --steps "$steps" --log-every 20 --no-progress --out "$out"
        done
    done
}

plan_inputs mahjong mahjong data/mahjong 16,32,64,128,256,512,1024,2048 64,256,512 32,128,512,2048 16,64,256,1024
plan_inputs charlm "$CHARLM" data/text 4,8,16,32,64,128,256,512 16,64,128 8,32,128,512 4,16,64,256

plan_check() {  # NAME WORKLOAD CHECKS (the check trains a module of your own only where --workload names it)
    local name=$1 workload=$2 checks=$3
    [ -f "plan_$name/plan.jsonl" ] || "$T" plan "plan_$name/bench.jsonl" "plan_$name"/runs/* "tt_$name" --devices 1,2 \
        --out "plan_$name/plan.jsonl" --check "$checks" --check-dir "plan_$name/checks" --workload "$workload"
}
plan_check mahjong mahjong "${MAHJONG_CHECKS:-best,samples-per-s,cpu:compile:fp32/1/512}"
plan_check charlm "$CHARLM" "${CHARLM_CHECKS:-best,samples-per-s,cpu:compile:fp32/1/128}"

for name in mahjong charlm; do
    cp "tt_$name/time_to_target.jsonl" "$RESULTS/time_to_target_study_$name.jsonl"
    cp "plan_$name/bench.jsonl" "$RESULTS/plan_bench_$name.jsonl"
    cp "plan_$name/plan.jsonl" "$RESULTS/plan_$name.jsonl"
    keep_runs "$RESULTS/plan_$name" "plan_$name/" "plan_$name/runs"/*/ "plan_$name/checks"/*/
done

cd "$REPO"
rm -f docs/results/plan_h200_mahjong_base.jsonl
"$T" plan docs/results/bench_h200_mahjong_base.jsonl docs/results/time_to_target_study_mahjong.jsonl --borrow-steps \
    --devices 1,8 --targets cuda:eager:tf32,cuda:eager:bf16,cuda:compile:bf16 --global-batches 512,1024,2048,4096,8192,16384 \
    --out docs/results/plan_h200_mahjong_base.jsonl > docs/results/plan_h200_mahjong_base.txt

# The same prediction with a batch that grows (`--schedules fixed,auto`): auto's profile of the noise
# scale over a run comes from the committed one-rank run of tiny Mahjong (docs/results/time_to_target_one_rank).
rm -f docs/results/plan_h200_mahjong_base_auto.jsonl
"$T" plan docs/results/bench_h200_mahjong_base.jsonl docs/results/time_to_target_study_mahjong.jsonl \
    docs/results/time_to_target_one_rank --borrow-steps --devices 1,8 --targets cuda:eager:bf16,cuda:compile:bf16 \
    --global-batches 512,1024,2048,4096,8192,16384 --schedules fixed,auto \
    --out docs/results/plan_h200_mahjong_base_auto.jsonl > docs/results/plan_h200_mahjong_base_auto.txt
