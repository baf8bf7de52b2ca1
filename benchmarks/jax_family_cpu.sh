#!/usr/bin/env bash
# The jax family's own lowerings and options, measured on this machine's CPU (rows into docs/results):
#   - recurrent layers as one scan over time: the LSTM and GRU language models of benchmarks/coverage
#     beside eager PyTorch, one run each (jax_recurrent_cpu.jsonl);
#   - repeated layers as one scan: timm's ViT-S/16 at its tiny size, unrolled beside scan-layers+remat,
#     one run: the rows' compile_s and samples/s (jax_scan_compile_cpu.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
TRAINSPEED=${TRAINSPEED:-.venv/bin/trainspeed}
OUT=${OUT:-docs/results}
export PYTHONPATH=benchmarks/coverage${PYTHONPATH:+:$PYTHONPATH}
quick="--threads 2 --windows 3 --min-window-s 0.5 --no-progress"
for model in lstm_lm gru_lm; do
    "$TRAINSPEED" bench --workload user_models:$model --targets cpu:eager:fp32,jax:jit:fp32 --baseline cpu:eager:fp32 \
        --batch-sizes 16,64,256 $quick --out "$OUT/jax_recurrent_cpu.jsonl"
done
"$TRAINSPEED" bench --workload timm:vit_small_patch16_224 --size tiny --targets jax:jit:fp32,jax:jit:fp32:scan-layers+remat \
    --baseline jax:jit:fp32 --batch-sizes 8 $quick --out "$OUT/jax_scan_compile_cpu.jsonl"
