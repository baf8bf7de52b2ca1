#!/usr/bin/env bash
# What `study critical-batch` costs in wall time and CPU seconds beside `study time-to-target` of the
# same workload, both at their committed settings, run one after another on the same machine:
#
#   BEFORE=ee75469^ bash benchmarks/critical_batch_cost.sh [WORK] [PART...]   # WORK: build/critical_batch_cost
#
# PARTs (default: mahjong gpt2 charlm, in this order; each adds its rounds to the rows the part before wrote):
#   mahjong  tiny Mahjong, rounds 1 to 3 in rotated order: the time-to-target study of
#            benchmarks/time_to_target_plan.sh, and the critical-batch study of benchmarks/auto_vs_fixed.sh's
#            part critical (its base run, 30 branches of 8,192 samples), two trainings at a time in both
#   gpt2     hf:gpt2 (tiny, seq=65), round 4: the time-to-target study of named_time_to_target_gpt2.jsonl
#            and the critical-batch study of auto_vs_fixed.sh's part critical-gpt2 (45 branches of 1,024)
#   charlm   the char-LM example, round 5: the time-to-target study of benchmarks/time_to_target_plan.sh
#            and the critical-batch study of auto_vs_fixed.sh's part critical-charlm (45 branches of 4,096)
#   gpt2-seeds2  hf:gpt2 again, round 6: its critical-batch study at 2 seeds (as its time-to-target study
#            and Mahjong's critical-batch study have) in place of 3, 30 branches
#   gpt2-climb  hf:gpt2 again, round 7: its critical-batch study at 3 seeds as in round 4, where each point now
#            climbs its factors (no branch of a factor past one that did not match)
#   gpt2-factor-seeds  hf:gpt2 again, round 8: the climb at 3 seeds of factor 1 and 2 of each other factor
#            (--factor-seeds 2)
# BEFORE (optional): a commit whose critical-batch study is timed beside this checkout's, the same
# settings (git archive of it into WORK/before): ee75469^ started a process per branch.
#   -> docs/results/critical_batch_cost.{jsonl,md}
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/critical_batch_cost}
shift || true
PARTS=${*:-mahjong gpt2 charlm}

source "$REPO/benchmarks/study_data.sh"
work_in "$WORK"
study_data
ROWS="$RESULTS/critical_batch_cost.jsonl"
BEFORE_RUN=()
if [ -n "${BEFORE:-}" ]; then
    rm -rf before && mkdir before && git -C "$REPO" archive "$BEFORE" | tar -x -C before
    BEFORE_RUN=(--before critical-batch-before=before
                --before-name "$(git -C "$REPO" rev-parse --short "$BEFORE") (a process per branch)")
fi

cost() {  # FIRST-ROUND ROUNDS TIME-TO-TARGET-ARGS CRITICAL-BATCH-ARGS
    local runs=(--run "time-to-target=$3" --run "critical-batch=$4")
    [ -z "${BEFORE:-}" ] || runs+=(--run "critical-batch-before=$4" "${BEFORE_RUN[@]}")
    local append=()
    [ "$1" = 1 ] || append=(--append)
    "$PYTHON" "$REPO/benchmarks/critical_batch_cost.py" --work . --first-round "$1" --rounds "$2" "${append[@]}" \
        "${runs[@]}" --out "$ROWS"
}

gpt2_base() {  # the hf:gpt2 base run, and the study its critical batches are compared with
    [ -f cb_gpt2_base/summary.json ] || "$T" train --workload hf:gpt2 --size tiny,seq=65 --data data/text \
        --batch-size-per-device 8 --lr 0.004 --lr-scaling sqrt --lr-reference-batch 32 --warmup-steps 128 \
        --min-lr-ratio 1 --samples 40960 --until 'val/loss<=2.9' --eval-every-samples 1024 --eval-batches 128 \
        --log-every 16 --checkpoint-every 32 --stop-at-target --noise-scale-micro-batches 2 --keep-checkpoints 0 \
        --threads 1 --num-workers 1 --no-progress --out cb_gpt2_base
    cp "$RESULTS/named_time_to_target_gpt2.jsonl" named_time_to_target_gpt2.jsonl
}
GPT2_STUDY="study time-to-target --workload hf:gpt2 --size tiny,seq=65 --data data/text --until 'val/loss<=2.9' \
--global-batches 8,32,128 --seeds 2 --base-lr 1e-3 --reference-batch 32 --lr-factors 0.5,1,2 --max-samples 40960 \
--eval-every-samples 1024 --val-samples 1024 --warmup-samples 1024 --no-progress"
GPT2_CRITICAL="study critical-batch --from cb_gpt2_base --at 0.25,0.5,1 --factors 1,2,4,8,16 --branch-samples 1024 \
--val-samples 1024 --parallel-runs 2 --no-progress --compare-study named_time_to_target_gpt2.jsonl"

for part in $PARTS; do
    case $part in
    mahjong)
        [ -f cb_base/summary.json ] || "$T" train --workload mahjong --size tiny --data data/mahjong \
            --batch-size-per-device 64 --lr 0.0012 --warmup-steps 64 --min-lr-ratio 1 --steps 6144 \
            --until 'val/accuracy>=0.85' --stop-at-target --eval-every-samples 4096 --eval-batches 32 \
            --noise-scale-micro-batches 2 --log-every 16 --checkpoint-every 40 --keep-checkpoints 0 \
            --threads 1 --num-workers 1 --no-progress --out cb_base
        cp "$RESULTS/time_to_target_study_mahjong.jsonl" time_to_target_study_mahjong.jsonl
        cost 1 3 "study time-to-target --preset full --workload mahjong --size tiny --data data/mahjong \
--until 'val/accuracy>=0.85' --global-batches 32,128,512,2048 --seeds 3 --lr-factors 1,2,4 --max-samples 393216 \
--eval-every-samples 4096 --val-samples 2048 --warmup-samples 4096 --threads 1 --parallel-runs 2 --no-progress" \
            "study critical-batch --from cb_base --at 0.25,0.5,1 --factors 1,2,4,8,16 --seeds 2 --branch-samples 8192 \
--val-samples 8192 --parallel-runs 2 --no-progress --compare-study time_to_target_study_mahjong.jsonl" ;;
    gpt2)
        gpt2_base
        cost 4 1 "$GPT2_STUDY" "$GPT2_CRITICAL --seeds 3 --factor-seeds 3" ;;
    gpt2-seeds2)
        gpt2_base
        cost 6 1 "$GPT2_STUDY" "$GPT2_CRITICAL --seeds 2" ;;
    gpt2-climb)
        gpt2_base
        cost 7 1 "$GPT2_STUDY" "$GPT2_CRITICAL --seeds 3 --factor-seeds 3" ;;
    gpt2-factor-seeds)
        gpt2_base
        cost 8 1 "$GPT2_STUDY" "$GPT2_CRITICAL --seeds 3 --factor-seeds 2" ;;
    charlm)
        [ -f cb_charlm_base/summary.json ] || "$T" train --workload "$CHARLM" --size tiny --data data/text \
            --batch-size-per-device 32 --lr 0.0226274 --lr-scaling sqrt --lr-reference-batch 32 --warmup-steps 64 \
            --min-lr-ratio 1 --samples 262144 --until 'val/bits_per_char<=3.6' --eval-every-samples 2048 --eval-batches 32 \
            --log-every 8 --checkpoint-every 16 --stop-at-target --noise-scale-micro-batches 2 --noise-scale-every 1 \
            --keep-checkpoints 0 --threads 1 --num-workers 1 --no-progress --out cb_charlm_base
        cp "$RESULTS/time_to_target_study_charlm.jsonl" time_to_target_study_charlm.jsonl
        cost 5 1 "study time-to-target --preset full --workload $CHARLM --size tiny --data data/text \
--until 'val/bits_per_char<=3.6' --global-batches 8,32,128,512 --seeds 3 --lr-factors 0.5,1,2 --reference-batch 64 \
--max-lr-extensions 6 --max-samples 262144 --eval-every-samples 2048 --val-samples 1024 --warmup-samples 2048 \
--threads 1 --parallel-runs 2 --no-progress" \
            "study critical-batch --from cb_charlm_base --at 0.25,0.5,1 --factors 1,2,4,8,16 --seeds 3 --factor-seeds 3 --branch-samples 4096 \
--val-samples 2048 --workload $CHARLM --parallel-runs 2 --no-progress --compare-study time_to_target_study_charlm.jsonl" ;;
    *) echo "unknown part $part (mahjong, gpt2, charlm, gpt2-seeds2, gpt2-climb, gpt2-factor-seeds)" >&2; exit 2 ;;
    esac
done
