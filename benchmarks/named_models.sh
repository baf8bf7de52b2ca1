#!/usr/bin/env bash
# The committed results of library models by name (docs/results/named_*), each run in a work folder
# with the relative paths the rows record:
#
#   bash benchmarks/named_models.sh [WORK] [TIMM_BENCHMARK_PY]   # WORK defaults to build/named_models
#
# 1. bench rows of timm:resnet50, timm:vit_small_patch16_224, torchvision:resnet18 and hf:gpt2
#    (size tiny) on cpu:eager, cpu:compile and xla:lazy, one thread, in one run per model;
# 2. `trainspeed check` (the XLA port check) of the same four models;
# 3. hf:gpt2 trained on 2 ranks on token shards (standard-library sources as bytes);
# 4. timm:resnet18 served by `trainspeed serve --workload timm:resnet18` and benched through remote:;
# 5. with TIMM_BENCHMARK_PY (benchmark.py of the timm repository at the installed timm's tag):
#    timm's own benchmark beside the bench on timm:resnet50 (benchmarks/timm_side_by_side.py);
# 6. hf:gpt2 trained SPMD: one process driving 2 XLA devices of the CPU client;
# 7. a time-to-target study of hf:gpt2 on the token shards, then `trainspeed plan` from it, bench
#    rows and 1-rank runs, with its check (the recommended configuration and the samples/s pick, 3
#    seeds each, each configuration's bench row measured again first; torch.compile's caches off).
#    `named_plan_recheck.sh` runs this check alone, from the committed inputs.
# Each step skips what its outputs already hold; the results are copied into docs/results.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$REPO/build/named_models}
TIMM_BENCHMARK=${2:-}
T=${TRAINSPEED:-$REPO/.venv/bin/trainspeed}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
RESULTS=$REPO/docs/results
MODELS="timm:resnet50 timm:vit_small_patch16_224 torchvision:resnet18 hf:gpt2"
PORT_ONLY="timm:convnext_tiny timm:efficientnet_b0 hf:llama hf:bert hf:mixtral"
export PJRT_DEVICE=CPU
source "$REPO/benchmarks/study_data.sh"
mkdir -p "$WORK"
cd "$WORK"

for model in $MODELS; do
    grep -q "\"$model\"" bench.jsonl 2>/dev/null || "$T" bench --workload "$model" --size tiny \
        --targets cpu:eager:fp32,cpu:compile:fp32,xla:lazy:fp32 --batch-sizes 8 --threads 1 --windows 3 \
        --min-window-s 0.5 --warmup-steps 2 --no-progress --no-plot --out bench.jsonl
done

mkdir -p port_check
for model in $MODELS $PORT_ONLY; do  # a model whose step fails on XLA keeps its one error line
    name=${model//:/_}
    [ -f "port_check/$name.txt" ] || "$T" check --workload "$model" --size tiny --target xla:lazy:fp32 \
        --batch-size 8 --out "port_check/$name.json" > "port_check/$name.txt" 2> "port_check/$name.err" \
        || grep -v '^W[0-9]' "port_check/$name.err" >> "port_check/$name.txt"
    rm -f "port_check/$name.err"
done

text_data
[ -f runs/gpt2_2rank/summary.json ] || "$T" train --workload hf:gpt2 --size tiny,seq=65 --data data/text --nproc 2 \
    --threads 1 --batch-size-per-device 16 --steps 300 --eval-every 100 --eval-batches 20 --lr 1e-3 --lr-scaling none \
    --warmup-steps 30 --no-progress --out runs/gpt2_2rank

if [ ! -f remote.jsonl ]; then
    "$T" serve --target cpu:eager:fp32 --threads 1 --listen 127.0.0.1:0 --workload timm:resnet18 > serve.out 2> serve.log &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null || true' EXIT
    for _ in $(seq 120); do [ -s serve.out ] && break; sleep 0.5; done
    REMOTE=$(head -n 1 serve.out)
    "$T" bench --workload timm:resnet18 --size tiny --targets "cpu:eager:fp32,$REMOTE" --feed host --batch-sizes 8,32 \
        --threads 1 --windows 3 --min-window-s 0.5 --no-progress --no-plot --out remote.jsonl
    kill $SERVER; wait $SERVER 2>/dev/null || true
fi

if [ -n "$TIMM_BENCHMARK" ] && [ ! -f timm_side_by_side.jsonl ]; then
    cp "$TIMM_BENCHMARK" timm_benchmark.py  # the row's command then names a path of this folder
    "$PYTHON" "$REPO/benchmarks/timm_side_by_side.py" --timm-benchmark timm_benchmark.py --model resnet50 \
        --img-size 64 --batch-size 16 --rounds 3 --out timm_side_by_side.jsonl
fi

[ -f runs/gpt2_spmd/summary.json ] || "$T" train --workload hf:gpt2 --size tiny,seq=65 --data data/text \
    --target xla:lazy:fp32 --nproc 2 --threads 1 --batch-size-per-device 8 --steps 100 --eval-every 25 --eval-batches 64 \
    --lr 1e-3 --lr-scaling none --warmup-steps 6 --no-progress --out runs/gpt2_spmd

gpt2_time_to_target_study ttt_gpt2
[ -f plan_gpt2/bench.jsonl ] || "$T" bench --workload hf:gpt2 --size tiny,seq=65 \
    --targets cpu:eager:fp32,cpu:compile:fp32 --batch-sizes 8,32,128 --threads 1 --windows 3 --min-window-s 0.5 \
    --no-progress --no-plot --out plan_gpt2/bench.jsonl
for batch in 8 32 128; do  # each 120 steps, or 16,384 samples where fewer
    steps=$(( 16384 / batch )); steps=$(( steps > 120 ? 120 : steps ))
    [ -f "plan_gpt2/runs/ranks1-b$batch/summary.json" ] || "$T" train --workload hf:gpt2 --size tiny,seq=65 \
        --data data/text --nproc 1 --threads 1 --batch-size-per-device "$batch" --steps "$steps" --log-every 20 \
        --no-progress --out "plan_gpt2/runs/ranks1-b$batch"
done
[ -f plan_gpt2/plan.jsonl ] || TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 "$T" plan plan_gpt2/bench.jsonl plan_gpt2/runs/* \
    ttt_gpt2 --devices 1 --out plan_gpt2/plan.jsonl --check best,samples-per-s --check-dir plan_gpt2/checks \
    --check-seeds 3 --check-rebench > plan_gpt2/plan.txt

cp bench.jsonl "$RESULTS/named_models_bench.jsonl"
cp bench.csv "$RESULTS/named_models_bench.csv"  # the CSV bench writes beside its rows
"$T" plot bench.jsonl --out "$RESULTS/named_models_bench" > /dev/null
mkdir -p "$RESULTS/named_models_port_check"
cp port_check/*.txt port_check/*.json "$RESULTS/named_models_port_check/"
# one table of the verdicts
for file in port_check/*.txt; do echo "$(basename "$file" .txt): $(grep -E '^(verdict|trainspeed: error)' "$file")"; done \
    > "$RESULTS/named_models_port_check/verdicts.txt"
mkdir -p "$RESULTS/named_gpt2_2rank"
cp runs/gpt2_2rank/summary.json runs/gpt2_2rank/metrics.jsonl "$RESULTS/named_gpt2_2rank/"
cp remote.jsonl "$RESULTS/named_remote_timm_resnet18.jsonl"
[ ! -f timm_side_by_side.jsonl ] || cp timm_side_by_side.jsonl "$RESULTS/timm_side_by_side.jsonl"
mkdir -p "$RESULTS/named_gpt2_spmd"
cp runs/gpt2_spmd/summary.json runs/gpt2_spmd/metrics.jsonl "$RESULTS/named_gpt2_spmd/"
cp ttt_gpt2/time_to_target.jsonl "$RESULTS/named_time_to_target_gpt2.jsonl"
cp plan_gpt2/bench.jsonl "$RESULTS/named_plan_bench_gpt2.jsonl"
cp plan_gpt2/plan.jsonl "$RESULTS/named_plan_gpt2.jsonl"
cp plan_gpt2/plan.txt "$RESULTS/named_plan_gpt2.txt"
"$T" plot "$RESULTS/named_time_to_target_gpt2.jsonl" > /dev/null
"$T" plot "$RESULTS/named_plan_gpt2.jsonl" > /dev/null
keep_runs "$RESULTS/named_plan_gpt2" plan_gpt2/ plan_gpt2/runs/*/ plan_gpt2/checks/*/ plan_gpt2/checks/*/seed-*/
cp plan_gpt2/checks/rebench-*.jsonl "$RESULTS/named_plan_gpt2/checks/"
