#!/usr/bin/env bash
# The steps the TPU session measures, exported on this machine (torch + torchax + CPU JAX) into
# .tpu/ (ignored by git), and the pure-Python wheels that machine's own package index may lack into
# .whl-tpu/. Then, on a TPU host that has JAX, numpy and libtpu only, from the repository root:
#     bash benchmarks/tpu_session.sh mahjong OUT_DIR     (and: named)
# Base-sized weights would not travel to a machine reached with a 64 MiB limit, so parameters of
# 4,096 elements or more are drawn on the device (`--initial-state drawn`): these are benches.
set -euo pipefail
cd "$(dirname "$0")/.."
TRAINSPEED=${TRAINSPEED:-.venv/bin/trainspeed}
export_once() {  # folder, then the export's flags
    local folder=$1; shift
    [ -e ".tpu/$folder" ] || "$TRAINSPEED" export --platform tpu --initial-state drawn --out ".tpu/$folder" "$@"
}
mkdir -p .tpu/attention
export_once mahjong_base_fp32 --workload mahjong --size base --target jax:jit:fp32 --batch-sizes 2^6..2^12
export_once mahjong_base_bf16 --workload mahjong --size base --target jax:jit:bf16 --batch-sizes 2^6..2^12
export_once mahjong_base_fast_bf16 --workload mahjong --size base-fast --target jax:jit:bf16 --batch-sizes 64,256,1024,4096
# the attention layout switch beside the step it changes (tpu_session.sh attention)
export_once attention/base_fast_bf16 --workload mahjong --size base-fast --target jax:jit:bf16 --batch-sizes 64,1024,4096
export_once attention/base_fast_packed_bf16 --workload mahjong --size base-fast+attn-packed-heads --target jax:jit:bf16 \
    --batch-sizes 64,1024,4096
export_once attention/base_fp32 --workload mahjong --size base --target jax:jit:fp32 --batch-sizes 4096
export_once attention/base_packed_fp32 --workload mahjong --size base+attn-packed-heads --target jax:jit:fp32 --batch-sizes 4096
# the fused attention kernel beside the step it changes (tpu_session.sh fused-bf16, fused-fp32)
mkdir -p .tpu/fused
for precision in bf16 fp32; do
    size=base; [ $precision = bf16 ] && size=base-fast
    export_once fused/${size//-/_}_$precision --workload mahjong --size $size --target jax:jit:$precision \
        --batch-sizes 64,128,256,512,1024,2048,4096
    export_once fused/${size//-/_}_fused_$precision --workload mahjong --size $size+attn-fused-qkv --target jax:jit:$precision \
        --batch-sizes 64,128,256,512,1024,2048,4096
    # the stream between blocks as (batch x tokens, width): no relayout copies before the weight gradients
    export_once fused/${size//-/_}_flat_$precision --workload mahjong --size $size+flat-tokens --target jax:jit:$precision \
        --batch-sizes 64,256,4096
    export_once fused/${size//-/_}_fused_flat_$precision --workload mahjong --size $size+attn-fused-qkv+flat-tokens \
        --target jax:jit:$precision --batch-sizes 64,256,4096
done
# StyleGAN3-T 256's full iteration (tpu_session.sh stylegan3): FIR filters as depthwise convolutions and as
# matmuls, and without the activation recompute
export_once stylegan3_t256_bf16 --workload stylegan3 --size t256 --target jax:jit:bf16 --batch-sizes 8,16,32
export_once stylegan3_t256_fir_bf16 --workload stylegan3 --size t256+fir-matmul --target jax:jit:bf16 --batch-sizes 8,16,32
export_once stylegan3_t256_norecompute_bf16 --workload stylegan3 --size t256+recompute-none --target jax:jit:bf16 \
    --batch-sizes 16,32
# Batch 8 alone (tpu_session.sh stylegan3-b8): one program pair per folder, so a call compiles nothing else
export_once sg3_t256_b8 --workload stylegan3 --size t256 --target jax:jit:bf16 --batch-sizes 8
export_once sg3_t256_fir_b8 --workload stylegan3 --size t256+fir-matmul --target jax:jit:bf16 --batch-sizes 8
# Batch 32 in 4 micro-batches of 8 (tpu_session.sh stylegan3-b32): one pass of 32 needs ~38 GB of HBM
export_once sg3_t256_b32_mb8 --workload stylegan3 --size t256 --target jax:jit:bf16 --batch-sizes 32 --micro-batch-size 8
# bf16 as the JAX peer writes it, and with the bf16 stream it can be given (tpu_session.sh like-for-like)
mkdir -p .tpu/like
export_once like/base_bf16 --workload mahjong --size base --target jax:jit:bf16 --batch-sizes 64,256,4096
export_once like/base_fast_bf16 --workload mahjong --size base-fast --target jax:jit:bf16 --batch-sizes 64,256,4096
export_once hf_gpt2_bf16 --workload hf:gpt2 --size base --target jax:jit:bf16 --batch-sizes 8,16,32
export_once timm_resnet50_bf16 --workload timm:resnet50 --size base --target jax:jit:bf16 --batch-sizes 32,64,128
# the step exported for a mesh of one device beside the same step with no mesh (tpu_session.sh mesh)
mkdir -p .tpu/mesh
export_once mesh/base_bf16 --workload mahjong --size base --target jax:jit:bf16 --batch-sizes 64,1024,4096 --batch-rows 1024
export_once mesh/base_bf16_x1 --workload mahjong --size base --target jax:jit:bf16 --batch-sizes 64,1024,4096 \
    --batch-rows 1024 --devices 1
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux2014_x86_64 -d .whl-tpu dacite==1.9.2 flatbuffers==25.12.19 optax==0.2.8 absl-py==2.5.1 psutil==7.2.2
