#!/usr/bin/env bash
# Training on a TPU host that has JAX and no torch, with exported steps (`train --exported`).
# Made here first (ignored by git, carried with the call as .tpu-train/ and .whl-tpu/):
#     trainspeed data mahjong-selfplay --games 200 --workers 2 --seed 0 --out SELFPLAY
#     tar czf .tpu-train/selfplay200.tgz -C SELFPLAY/.. --exclude mjai selfplay200   (index + shards)
#     trainspeed export --workload mahjong --size tiny --target jax:jit:fp32 --platform tpu \
#         --batch-sizes 64,256,1024 --out .tpu-train/mahjong_tiny_fp32
#     (and the wheels of benchmarks/tpu_export.sh, with psutil, in .whl-tpu/)
# Then, on the TPU host, from the repository root:
#   bash benchmarks/tpu_train.sh goal OUT     tiny Mahjong to 85% validation accuracy at batch 64 and 256
#        (the CPU runs' goal and flags), the exported step's bench at 64..1024, and two runs of 240
#        steps: one whole, one killed with kill -9 after its checkpoint of step 96 (OUT/runs.tgz)
#   bash benchmarks/tpu_train.sh resume OUT   a later call: the killed run (carried back as
#        .tpu-train/killed) resumed from its checkpoint to step 240 (OUT/resumed.tgz)
#   bash benchmarks/tpu_train.sh plan-check OUT   what `plan` needs and what checks it, from steps exported
#        with their step in slices (STEPS=.tpu-train/mahjong_tiny_fp32_metered, made with
#            trainspeed export --workload mahjong --size tiny --target jax:jit:fp32 --platform tpu \
#                --batch-sizes 64,128,256 --noise-scale-micro-batches 2 --out .tpu-train/mahjong_tiny_fp32_metered):
#        the bench at 64..256, a base run to the goal at batch 64 that measures its noise scale
#        (one step in 4 over 2 slices), and the same run's settings at 128 and 256 (OUT/plan_runs.tgz);
#        then, here: trainspeed plan BENCH BASE --schedules fixed --checked RUN128,RUN256 --out PLAN
#   bash benchmarks/tpu_train.sh plan-check-seeds OUT   the same checks at 128 and 256 on seeds 1000 and 2000
#        (OUT/plan_seed_runs.tgz)
#   bash benchmarks/tpu_train.sh plan-set OUT   a set of checks named before they run, all on the chip: the bench
#        at every exported batch, a base run to the goal at batch 64 (seed 0) that measures its noise scale,
#        then `plan` from those two, printing its predictions and then checking its best, the next smaller
#        and the next larger batch at seeds 1000..1002 (`--check-exported`: the checks train the exported
#        steps with the base run's recipe); STEPS names the metered export (as for plan-check, with
#        --batch-sizes 32,64,128,256,512,1024,2048), OUT/plan_set.tgz holds the rows and runs
#   bash benchmarks/tpu_train.sh process-end OUT   a JAX program's seconds from its last line to its exit
#        (2 rounds each of `sys.exit`, trainspeed's `end_process` and `os._exit`), in OUT/process_end.txt
set -euo pipefail
part=$1 out=$2
mkdir -p "$out"
source "$(dirname "$0")/tpu_host.sh"
steps=${STEPS:-.tpu-train/mahjong_tiny_fp32}  # STEPS, PYTHON: a dry run elsewhere (a CPU export, a venv)
python=${PYTHON:-python3}
runs=$(mktemp -d)
mkdir -p "$runs"
tar xzf .tpu-train/selfplay200.tgz -C "$runs"
train() { "$python" -m trainspeed train --exported "$steps" --data "$runs/selfplay200" --no-progress "$@"; }
GOAL=(--steps 1500 --eval-every-samples 8192 --eval-batches 8 --until "${UNTIL:-val/accuracy>=0.85}" --stop-at-target --log-every 16)
METERED=(--noise-scale-micro-batches 2 --noise-scale-every 4)
SAME=(--batch-size-per-device 64 --steps 240 --checkpoint-every 96 --keep-checkpoints 1 --eval-every 120 --log-every 16)
case $part in
goal)
    train "${GOAL[@]}" --batch-size-per-device 64 --out "$runs/goal_b64"
    train "${GOAL[@]}" --batch-size-per-device 256 --out "$runs/goal_b256"
    "$python" -m trainspeed bench --exported "$steps" --no-plot --windows 3 --min-window-s 0.3 --out "$runs/bench.jsonl"
    train "${SAME[@]}" --out "$runs/whole"
    train "${SAME[@]}" --out "$runs/killed" &
    pid=$!
    until [ -f "$runs/killed/checkpoints/step-000000096.npz" ]; do sleep 0.05; done
    kill -9 "$pid"; wait "$pid" || true
    tar czf "$out/runs.tgz" -C "$runs" --exclude selfplay200 . ;;
resume)
    cp -r .tpu-train/killed "$runs/killed"
    train "${SAME[@]}" --resume --out "$runs/killed"
    tar czf "$out/resumed.tgz" -C "$runs" killed ;;
plan-check)
    "$python" -m trainspeed bench --exported "$steps" --no-plot --windows 3 --min-window-s 0.3 --out "$runs/bench.jsonl"
    for batch in 64 128 256; do
        train "${GOAL[@]}" "${METERED[@]}" --batch-size-per-device "$batch" --out "$runs/metered_b$batch"
    done
    tar czf "$out/plan_runs.tgz" -C "$runs" --exclude selfplay200 --exclude checkpoints . ;;
plan-check-seeds)  # the checks again on seeds no other run used (their data order and slices)
    for seed in 1000 2000; do
        for batch in 128 256; do
            train "${GOAL[@]}" "${METERED[@]}" --batch-size-per-device "$batch" --seed "$seed" \
                --out "$runs/metered_b${batch}_s$seed"
        done
    done
    tar czf "$out/plan_seed_runs.tgz" -C "$runs" --exclude selfplay200 --exclude checkpoints . ;;
plan-set)
    if ! "$python" -c 'import matplotlib' 2>/dev/null; then  # the plan's modules import it; the host's own index has it
        PIP_CONFIG_FILE=/dev/null "$python" -m pip install --isolated -q --only-binary=:all: \
            --index-url file:///opt/pypi/simple --target /tmp/site-plot matplotlib
        export PYTHONPATH=$PYTHONPATH:/tmp/site-plot
    fi
    "$python" -m trainspeed bench --exported "$steps" --no-plot --windows 3 --min-window-s 0.3 --out "$runs/bench.jsonl"
    train "${GOAL[@]}" "${METERED[@]}" --batch-size-per-device 64 --out "$runs/base"
    "$python" -m trainspeed plan "$runs/bench.jsonl" "$runs/base" --schedules fixed --out "$runs/plan.jsonl" \
        --check best,best-smaller,best-larger --check-seeds 3 --check-exported "$steps" --check-dir "$runs/checks" \
        || echo "plan-set: plan exited $?"
    tar czf "$out/plan_set.tgz" -C "$runs" --exclude selfplay200 --exclude checkpoints . ;;
process-end)  # a JAX program's seconds from its last line to its exit: `sys.exit`, trainspeed's end, and the bare `os._exit`
    for round in 1 2; do
        for ending in sys.exit end_process os._exit; do
            "$python" -c "
import sys, time
import jax, jax.numpy as jnp
from trainspeed.process_end import end_process
square = jax.jit(lambda a: a @ a)(jnp.ones((4096, 4096), jnp.float32)).block_until_ready()
print(f'{time.time():.6f}', flush=True)
{'sys.exit': sys.exit, 'end_process': end_process, 'os._exit': __import__('os')._exit}['$ending'](0)" > "$runs/last_line"
            echo "process-end round $round $ending: $(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.3f}')" "$(cat "$runs/last_line")") s"
        done
    done | tee "$out/process_end.txt" ;;
*) echo "usage: bash benchmarks/tpu_train.sh goal|resume|plan-check|plan-check-seeds|plan-set|process-end OUT_DIR" >&2; exit 2 ;;
esac
