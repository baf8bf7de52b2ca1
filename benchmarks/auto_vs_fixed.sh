#!/usr/bin/env bash
# `train --batch-schedule auto` against fixed batches, and `study critical-batch` from one run, on the
# data and goals of the committed time-to-target studies (benchmarks/time_to_target_plan.sh):
#
#   bash benchmarks/auto_vs_fixed.sh [WORK] [PART...]   # WORK defaults to build/auto_vs_fixed
#
# PARTs (default: all, in this order):
#   mahjong     tiny Mahjong to val/accuracy>=0.85 on 1 rank: auto, auto at the workload's LR, the
#               committed study's best fixed batch (32) and its runner-up (128), the default batch
#               (1024), AdaptDL's adaptive batch from 32 (benchmarks/adaptdl_side_by_side.py; needs
#               `pip install adaptdl requests`), 3 seeds interleaved
#                                                       -> docs/results/auto_vs_fixed_mahjong.{jsonl,csv,png}
#   mahjong2    the same on 2 ranks: auto, the best fixed batch (32) and fixed 128 (the plan's
#               2-device pick), 3 seeds interleaved -> docs/results/auto_vs_fixed_mahjong_2ranks.*
#   calibrated  auto calibrated by critical_batch_mahjong_tolerance.jsonl (part critical), auto and
#               the best fixed batch, 1 rank, 3 seeds -> docs/results/auto_vs_fixed_mahjong_calibrated.*
#   critical    one base run at batch 64 that keeps its checkpoints, and its critical-batch study,
#               its samples against the committed study's -> docs/results/critical_batch_mahjong.jsonl
#               (the t rule of 2 seeds), critical_batch_mahjong_tolerance.jsonl (a tolerance of 0.01),
#               docs/results/critical_batch_mahjong_base/ (summary.json and metrics.jsonl)
#   critical-charlm, critical-gpt2  the same for the char-LM example (base batch 32) and hf:gpt2 (base
#               batch 8), at the committed studies' best batch and rate, 3 seeds, the t rule; then the
#               plan from that base run and its critical-batch rows (no study), and its eager checks
#                   -> docs/results/critical_batch_{charlm,gpt2}.jsonl, ..._base/, ..._plan.{jsonl,txt}
#   charlm      the char-LM example to val/bits_per_char<=3.6 on 1 rank: auto and the study's best
#               fixed batch (32)                        -> docs/results/auto_vs_fixed_charlm.*
#   gpt2        hf:gpt2 (tiny, seq=65) to val/loss<=2.9 on 1 rank: auto and the committed study's best
#               fixed batch (32 at LR factor 2); with GPT2_DEFAULT=1 the default batch (1,024) too
#                                                       -> docs/results/auto_vs_fixed_gpt2.*
#   cnn         the small CNN example (examples/small_cnn_workload.py) to val/top1_accuracy>=0.9 on 1
#               rank: auto from 16 to 512 (the meter's defaults), auto measuring every step, auto with
#               the bench's step times (--bench-jsonl, the bench run first), and fixed 32, 64 and 128,
#               all at the example's rate (3e-3 at its reference batch 64, sqrt rule); 5 seeds
#               interleaved         -> docs/results/auto_vs_fixed_cnn.*, auto_vs_fixed_cnn_bench.jsonl
#   mahjong-plain, charlm-plain, gpt2-plain  auto at the meter's defaults (one step in 32), weighing the
#               step times it measures (--auto-step-times run), against the study's best fixed batch run
#               plain (--noise-scale off: what a user runs), and (not gpt2, whose goal comes before auto
#               switches) auto by the noise scale alone (--auto-step-times off), 5 seeds interleaved
#               (Mahjong 10), each series alone on the machine, its load recorded in every row
#                                                       -> docs/results/auto_vs_plain_{mahjong,charlm,gpt2}.*
#   mahjong2-plain  tiny Mahjong on 2 ranks: auto (its noise scale from the ranks' gradients; with and without
#               its step times) against plain fixed 32 and 128 (16 and 64 per device, --noise-scale off),
#               5 seeds interleaved, alone
#                                                       -> docs/results/auto_vs_plain_mahjong_2ranks.*
#   cnn-plain   the small CNN as its part cnn, auto at the meter's defaults (with and without its step
#               times) against plain fixed 64 and 128 (--noise-scale off), 10 seeds interleaved, alone
#                                                       -> docs/results/auto_vs_plain_cnn.*
# Each part writes its rows after every run, so a part cut short keeps what it measured.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/auto_vs_fixed}
shift || true
PARTS=${*:-mahjong mahjong2 critical calibrated charlm}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
RESULTS=$REPO/docs/results
export PYTHONPATH=$REPO/examples:$REPO${PYTHONPATH:+:$PYTHONPATH}
T=("$PYTHON" -m trainspeed)
mkdir -p "$WORK"
cd "$WORK"

# The committed studies' data: 200 self-play games (seed 0); the first 200 standard-library sources.
[ -f data/mahjong/index.json ] || "${T[@]}" data mahjong-selfplay --games 200 --workers 1 --out data/mahjong --seed 0 --no-progress
if [ ! -f data/text/index.json ]; then
    "$PYTHON" "$REPO/examples/char_lm_workload.py" text.npz --files 200
    "${T[@]}" data from-arrays text.npz --out data/text --split-by document --val-fraction 0.1
fi

# The committed Mahjong study's recipe: a validation every 4,096 samples over 2,048, a warm-up over
# 4,096 samples, then a constant LR. Its best LR factor is 4 at batches 32, 128 and 512: 4x the
# workload's sqrt rule, i.e. --lr 0.0012 at the reference batch 512.
MAHJONG=(--workload mahjong --size tiny --data data/mahjong --until 'val/accuracy>=0.85' --eval-every-samples 4096
         --val-samples 2048 --warmup-samples 4096 --max-samples 393216 --seeds 0,1,2 --reference best-fixed-b32)
# One base run to the goal that keeps its checkpoints (noise scale from 2 micro-batches at every step, one thread),
# its branches at 1, 2, 4, 8 and 16 times its batch from a quarter, a half and all of its samples, 3
# seeds, 2 branches at a time, judged by the t rule against the committed study (a relative copy of
# its rows, so the rows name no path of this machine).
critical_study() {  # NAME STUDY-ROWS BRANCH-FLAGS... -- TRAIN-FLAGS...
    local name=$1 study=$2 branch=()
    shift 2
    while [ "$1" != -- ]; do branch+=("$1"); shift; done
    shift
    [ -f "cb_${name}_base/summary.json" ] || "${T[@]}" train "$@" --stop-at-target --noise-scale-micro-batches 2 --noise-scale-every 1 \
        --keep-checkpoints 0 --threads 1 --num-workers 1 --no-progress --out "cb_${name}_base"
    cp "$RESULTS/$study" "$study"
    "${T[@]}" study critical-batch --from "cb_${name}_base" --at 0.25,0.5,1 --factors 1,2,4,8,16 --seeds 3 --factor-seeds 3 \
        "${branch[@]}" --parallel-runs 2 --no-progress --compare-study "$study" --out "cb_$name"
    cp "cb_$name/critical_batch.jsonl" "$RESULTS/critical_batch_$name.jsonl"
    mkdir -p "$RESULTS/critical_batch_${name}_base"
    cp "cb_${name}_base/summary.json" "cb_${name}_base/metrics.jsonl" "$RESULTS/critical_batch_${name}_base/"
}

# The plan from that base run with its critical-batch rows in place of its noise scale (no study),
# what it lacks measured, and the eager checks of benchmarks/plan_checks.sh run right after.
plan_from_critical() {  # NAME WORKLOAD BATCHES CHECKS
    local name=$1
    [ -d "cb_${name}_checks" ] || "${T[@]}" plan "cb_${name}_base" "cb_$name" --measure --budget-s 600 \
        --measure-dir "cb_${name}_measured" --targets cpu:eager:fp32 --devices 1 --global-batches "$3" \
        --schedules fixed,auto --workload "$2" --check "$4" --check-dir "cb_${name}_checks" \
        --out "cb_${name}_plan.jsonl" > "cb_${name}_plan.txt"
    cp "cb_${name}_plan.jsonl" "$RESULTS/critical_batch_${name}_plan.jsonl"
    cp "cb_${name}_plan.txt" "$RESULTS/critical_batch_${name}_plan.txt"
}

for part in $PARTS; do
    case $part in
    mahjong)
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" "${MAHJONG[@]}" \
            --config 'auto=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012' \
            --config 'auto-workload-lr=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048' \
            --config 'best-fixed-b32=--batch-size-per-device 32 --lr 0.0003 --lr-scaling none' \
            --config 'fixed-b128=--batch-size-per-device 128 --lr 0.0006 --lr-scaling none' \
            --config 'default-b1024=--batch-size-per-device 1024' \
            --config 'adaptdl=--adaptdl --batch 32 --max-batch 2048 --lr 0.0003' \
            --keep-runs runs_mahjong --out "$RESULTS/auto_vs_fixed_mahjong.jsonl"
        mkdir -p "$RESULTS/auto_vs_fixed_mahjong_auto_run"   # one auto run: its batch against samples
        cp runs_mahjong/auto-s0/summary.json runs_mahjong/auto-s0/metrics.jsonl "$RESULTS/auto_vs_fixed_mahjong_auto_run/" ;;
    mahjong2)
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" "${MAHJONG[@]}" \
            --config 'auto=--nproc 2 --batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012' \
            --config 'best-fixed-b32=--nproc 2 --batch-size-per-device 16 --lr 0.0003 --lr-scaling none' \
            --config 'fixed-b128=--nproc 2 --batch-size-per-device 64 --lr 0.0006 --lr-scaling none' \
            --out "$RESULTS/auto_vs_fixed_mahjong_2ranks.jsonl" ;;
    calibrated)
        # auto with B_crit = c x B_simple, c from the critical-batch rows (part critical), beside
        # auto uncalibrated and the best fixed batch.
        cp "$RESULTS/critical_batch_mahjong_tolerance.jsonl" critical_batch_mahjong_tolerance.jsonl
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" "${MAHJONG[@]}" \
            --config "auto-calibrated=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012 --critical-batch critical_batch_mahjong_tolerance.jsonl" \
            --config 'auto=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012' \
            --config 'best-fixed-b32=--batch-size-per-device 32 --lr 0.0003 --lr-scaling none' \
            --keep-runs runs_calibrated --out "$RESULTS/auto_vs_fixed_mahjong_calibrated.jsonl" ;;
    critical)
        # The base run: batch 64 at the study's LR rule, to the goal, a checkpoint every 40 steps, all kept.
        [ -f cb_base/summary.json ] || "${T[@]}" train --workload mahjong --size tiny --data data/mahjong \
            --batch-size-per-device 64 --lr 0.0012 --warmup-steps 64 --min-lr-ratio 1 --steps 6144 \
            --until 'val/accuracy>=0.85' --stop-at-target --eval-every-samples 4096 --eval-batches 32 \
            --noise-scale-micro-batches 2 --noise-scale-every 1 --log-every 16 --checkpoint-every 40 --keep-checkpoints 0 \
            --threads 1 --num-workers 1 --no-progress --out cb_base
        # The branches (trained once, into cb_mahjong), then their rows against the committed study
        # (a relative copy of its rows, so the rows name no path of this machine), by the t rule of
        # 2 seeds and by a tolerance of 1 point of accuracy; neither trains a branch again.
        cp "$RESULTS/time_to_target_study_mahjong.jsonl" time_to_target_study_mahjong.jsonl
        CB=(study critical-batch --from cb_base --at 0.25,0.5,1 --factors 1,2,4,8,16 --seeds 2 --branch-samples 8192
            --val-samples 8192 --parallel-runs 1 --no-progress --compare-study time_to_target_study_mahjong.jsonl)
        "${T[@]}" "${CB[@]}" --out cb_mahjong
        "${T[@]}" "${CB[@]}" --runs-dir cb_mahjong/critical_batch_runs --out cb_mahjong_rows
        "${T[@]}" "${CB[@]}" --tolerance 0.01 --runs-dir cb_mahjong/critical_batch_runs --out cb_mahjong_tol
        cp cb_mahjong_rows/critical_batch.jsonl "$RESULTS/critical_batch_mahjong.jsonl"
        cp cb_mahjong_tol/critical_batch.jsonl "$RESULTS/critical_batch_mahjong_tolerance.jsonl"
        cp cb_base/summary.json cb_base/metrics.jsonl "$RESULTS/critical_batch_mahjong_base/" ;;
    critical-charlm)
        # The committed char-LM study's recipe (below) at its best batch, 32: a checkpoint every 16 steps.
        critical_study charlm time_to_target_study_charlm.jsonl --branch-samples 4096 --val-samples 2048 \
            --workload char_lm_workload:CharLMWorkload -- \
            --workload char_lm_workload:CharLMWorkload --size tiny --data data/text --batch-size-per-device 32 \
            --lr 0.0226274 --lr-scaling sqrt --lr-reference-batch 32 --warmup-steps 64 --min-lr-ratio 1 \
            --samples 262144 --until 'val/bits_per_char<=3.6' --eval-every-samples 2048 --eval-batches 32 \
            --log-every 8 --checkpoint-every 16
        plan_from_critical charlm char_lm_workload:CharLMWorkload 8,32,512 \
            cpu:eager:fp32/1/8,cpu:eager:fp32/1/auto:8..512 ;;
    critical-gpt2)
        # The committed hf:gpt2 study's recipe (below) at its best batch near the goal, 8 (0.002 at 8 by
        # sqrt from 0.004 at 32): a checkpoint every 32 steps.
        critical_study gpt2 named_time_to_target_gpt2.jsonl --branch-samples 1024 --val-samples 1024 -- \
            --workload hf:gpt2 --size tiny,seq=65 --data data/text --batch-size-per-device 8 \
            --lr 0.004 --lr-scaling sqrt --lr-reference-batch 32 --warmup-steps 128 --min-lr-ratio 1 \
            --samples 40960 --until 'val/loss<=2.9' --eval-every-samples 1024 --eval-batches 128 \
            --log-every 16 --checkpoint-every 32
        plan_from_critical gpt2 hf:gpt2 8,32,128 cpu:eager:fp32/1/32,cpu:eager:fp32/1/auto:8..128 ;;
    charlm)
        # The committed char-LM study's recipe; its best fixed batch is 32 at LR factor 16 of the
        # sqrt rule from 0.002 at 64 (0.0226); the example declares no reference batch (no scaling).
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload char_lm_workload:CharLMWorkload --size tiny \
            --data data/text --until 'val/bits_per_char<=3.6' --eval-every-samples 2048 --val-samples 1024 \
            --warmup-samples 2048 --max-samples 262144 --log-every 8 --seeds 0,1,2 --reference best-fixed-b32 \
            --config 'auto=--batch-schedule auto --global-batch-min 8 --global-batch-max 512 --lr 0.0226274 --lr-scaling sqrt --lr-reference-batch 32' \
            --config 'best-fixed-b32=--batch-size-per-device 32 --lr 0.0226274 --lr-scaling none' \
            --out "$RESULTS/auto_vs_fixed_charlm.jsonl" ;;
    gpt2)
        # The committed hf:gpt2 study's recipe (docs/results/named_models.md): base LR 1e-3 at batch 32,
        # a validation every 1,024 samples over 1,024, a warm-up over 1,024 samples, 40,960 samples at
        # most; its best fixed batch is 32 at LR factor 2 (0.002). auto starts at 8, the smallest batch
        # the study tried, at that rate scaled by sqrt (0.001 at 8), up to 128, the largest.
        # The default batch (GPT2_DEFAULT=1) trains 40 steps of 1,024 windows, each 6 to 37 s on the
        # shared 2-core machine: hours for 3 seeds, so it is left out unless asked for.
        DEFAULT=()
        [ -z "${GPT2_DEFAULT:-}" ] || DEFAULT=(--config 'default-b1024=--batch-size-per-device 1024')
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload hf:gpt2 --size tiny,seq=65 --data data/text \
            --until 'val/loss<=2.9' --eval-every-samples 1024 --val-samples 1024 --warmup-samples 1024 \
            --max-samples 40960 --log-every 8 --seeds "${GPT2_SEEDS:-0,1,2}" --reference best-fixed-b32 \
            --config 'auto=--batch-schedule auto --global-batch-min 8 --global-batch-max 128 --lr 0.002 --lr-scaling sqrt --lr-reference-batch 32' \
            --config 'best-fixed-b32=--batch-size-per-device 32 --lr 0.002 --lr-scaling none' \
            "${DEFAULT[@]}" --out "$RESULTS/auto_vs_fixed_gpt2.jsonl" ;;
    cnn)
        # A step of a few milliseconds: what the meter and the schedule add to it shows.
        [ -f shapes.npz ] || "$PYTHON" "$REPO/examples/small_cnn_workload.py" shapes.npz
        [ -f bench_cnn.jsonl ] || "${T[@]}" bench --workload small_cnn_workload:SmallCNNWorkload --size tiny \
            --targets cpu:eager:fp32 --batch-sizes 16,32,64,128,256,512 --threads 1 --no-progress --no-plot \
            --out bench_cnn.jsonl
        cp bench_cnn.jsonl "$RESULTS/auto_vs_fixed_cnn_bench.jsonl"
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload small_cnn_workload:SmallCNNWorkload --size tiny \
            --data shapes.npz --until 'val/top1_accuracy>=0.9' --eval-every-samples 2048 --val-samples 1024 \
            --warmup-samples 1024 --max-samples 200000 --log-every 8 --num-workers 0 --seeds "${CNN_SEEDS:-0,1,2,3,4}" \
            --reference fixed-b64 \
            --config 'auto=--batch-schedule auto --global-batch-min 16 --global-batch-max 512' \
            --config 'auto-every-step=--batch-schedule auto --global-batch-min 16 --global-batch-max 512 --noise-scale-every 1' \
            --config 'auto-timed=--batch-schedule auto --global-batch-min 16 --global-batch-max 512 --bench-jsonl bench_cnn.jsonl' \
            --config 'fixed-b32=--batch-size-per-device 32' \
            --config 'fixed-b64=--batch-size-per-device 64' \
            --config 'fixed-b128=--batch-size-per-device 128' \
            --keep-runs runs_cnn --out "$RESULTS/auto_vs_fixed_cnn.jsonl" ;;
    cnn-plain)
        [ -f shapes.npz ] || "$PYTHON" "$REPO/examples/small_cnn_workload.py" shapes.npz
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload small_cnn_workload:SmallCNNWorkload --size tiny \
            --data shapes.npz --until 'val/top1_accuracy>=0.9' --eval-every-samples 2048 --val-samples 1024 \
            --warmup-samples 1024 --max-samples 200000 --log-every 8 --num-workers 0 \
            --seeds "${PLAIN_SEEDS:-0,1,2,3,4,5,6,7,8,9}" --reference plain-fixed-b128 \
            --config 'auto=--batch-schedule auto --global-batch-min 16 --global-batch-max 512 --auto-step-times run' \
            --config 'auto-noise-only=--batch-schedule auto --global-batch-min 16 --global-batch-max 512 --auto-step-times off' \
            --config 'plain-fixed-b64=--batch-size-per-device 64 --noise-scale off' \
            --config 'plain-fixed-b128=--batch-size-per-device 128 --noise-scale off' \
            --out "$RESULTS/auto_vs_plain_cnn.jsonl" ;;
    mahjong-plain)
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" "${MAHJONG[@]}" --seeds "${PLAIN_SEEDS:-0,1,2,3,4,5,6,7,8,9}" \
            --reference plain-fixed-b32 \
            --config 'auto=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012 --auto-step-times run' \
            --config 'auto-noise-only=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012 --auto-step-times off' \
            --config 'plain-fixed-b32=--batch-size-per-device 32 --lr 0.0003 --lr-scaling none --noise-scale off' \
            --out "$RESULTS/auto_vs_plain_mahjong.jsonl" ;;
    mahjong2-plain)
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" "${MAHJONG[@]}" --seeds "${PLAIN_SEEDS:-0,1,2,3,4}" \
            --reference plain-fixed-b128 \
            --config 'auto=--nproc 2 --batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012 --auto-step-times run' \
            --config 'auto-noise-only=--nproc 2 --batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012 --auto-step-times off' \
            --config 'plain-fixed-b32=--nproc 2 --batch-size-per-device 16 --lr 0.0003 --lr-scaling none --noise-scale off' \
            --config 'plain-fixed-b128=--nproc 2 --batch-size-per-device 64 --lr 0.0006 --lr-scaling none --noise-scale off' \
            --out "$RESULTS/auto_vs_plain_mahjong_2ranks.jsonl" ;;
    charlm-plain)
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload char_lm_workload:CharLMWorkload --size tiny \
            --data data/text --until 'val/bits_per_char<=3.6' --eval-every-samples 2048 --val-samples 1024 \
            --warmup-samples 2048 --max-samples 262144 --log-every 8 --seeds "${PLAIN_SEEDS:-0,1,2,3,4}" \
            --reference plain-fixed-b32 \
            --config 'auto=--batch-schedule auto --global-batch-min 8 --global-batch-max 512 --lr 0.0226274 --lr-scaling sqrt --lr-reference-batch 32 --auto-step-times run' \
            --config 'auto-noise-only=--batch-schedule auto --global-batch-min 8 --global-batch-max 512 --lr 0.0226274 --lr-scaling sqrt --lr-reference-batch 32 --auto-step-times off' \
            --config 'plain-fixed-b32=--batch-size-per-device 32 --lr 0.0226274 --lr-scaling none --noise-scale off' \
            --out "$RESULTS/auto_vs_plain_charlm.jsonl" ;;
    gpt2-plain)
        # The study's best configuration near the goal is batch 8 at 0.002 (20.5 s against 30.0 s for
        # 32 at 0.002); auto starts there, at that rate at batch 8 scaled by sqrt as it grows.
        "$PYTHON" "$REPO/benchmarks/auto_vs_fixed.py" --workload hf:gpt2 --size tiny,seq=65 --data data/text \
            --until 'val/loss<=2.9' --eval-every-samples 1024 --val-samples 1024 --warmup-samples 1024 \
            --max-samples 40960 --log-every 8 --seeds "${PLAIN_SEEDS:-0,1,2,3,4}" --reference plain-fixed-b8 \
            --config 'auto=--batch-schedule auto --global-batch-min 8 --global-batch-max 128 --lr 0.002 --lr-scaling sqrt --lr-reference-batch 8 --auto-step-times run' \
            --config 'plain-fixed-b8=--batch-size-per-device 8 --lr 0.002 --lr-scaling none --noise-scale off' \
            --out "$RESULTS/auto_vs_plain_gpt2.jsonl" ;;
    *) echo "auto_vs_fixed.sh: unknown part $part (mahjong, mahjong2, calibrated, critical, critical-charlm, critical-gpt2, charlm, gpt2, cnn, mahjong-plain, charlm-plain, gpt2-plain, cnn-plain)" >&2; exit 2 ;;
    esac
done
