#!/usr/bin/env bash
# One TPU session's measurements, run on the TPU host from the repository root, after
# benchmarks/tpu_export.sh made .tpu/ and .whl-tpu/ here. Nothing on this path imports torch.
#   bash benchmarks/tpu_session.sh mahjong OUT_DIR   trainspeed's exported Mahjong base step, fp32 and
#        bf16 (device- and host-fed) and base-fast, beside the hand-written JAX peer at the same
#        batches, one run id, the chip's matmul peak in every row
#   bash benchmarks/tpu_session.sh named OUT_DIR     hf:gpt2 and timm:resnet50 at three batch sizes, each
#        model under its own time limit (GPT2_LIMIT_S, RESNET_LIMIT_S): a compile that does not finish
#        leaves the next model its time, and the rows of the sizes measured before it
#   bash benchmarks/tpu_session.sh profile OUT_DIR   Mahjong base fp32 and bf16 at batch 64, 1024 and 4096
#        traced (benchmarks/tpu_profile.py): summary.{json,md} and the raw HLO and traces as a tar.gz
#   bash benchmarks/tpu_session.sh attention OUT_DIR Mahjong base-fast bf16 beside base-fast+attn-packed-heads at
#        64, 1024 and 4096, then fp32 base beside base+attn-packed-heads at 4096 (each under its own
#        time limit, ATTN_BF16_LIMIT_S and ATTN_FP32_LIMIT_S: 100 s left the switch no time for its compile
#        at 4096), one run id, the chip's matmul peak in every row
#   bash benchmarks/tpu_session.sh fused-bf16 OUT_DIR The fused attention kernel alone against XLA's attention
#        (benchmarks/qkv_attention_kernel.py: same outputs and gradients, seconds per call), then Mahjong
#        base-fast bf16 beside base-fast+attn-fused-qkv and the JAX peer at 64, 256, 1024 and 4096 (FUSED_SIZES),
#        one run id; FUSED_KERNEL=0 leaves the kernel alone out, FUSED_FOLDERS names the folders of .tpu/fused to bench
#   bash benchmarks/tpu_session.sh fused-fp32 OUT_DIR  The same in fp32: base beside base+attn-fused-qkv and the peer
#   bash benchmarks/tpu_session.sh stylegan3 OUT_DIR StyleGAN3-T 256 in bf16, its full iteration (G, D, R1 every 16th
#        step, EMA): the default (device- and host-fed: a device_put of the 256 px uint8 images every
#        step), +fir-matmul and +recompute-none, at batch 8, 16 and 32 (each folder under its own time
#        limit), in windows of exactly 16 steps (one R1 each)
#   bash benchmarks/tpu_session.sh stylegan3-b8 OUT_DIR  StyleGAN3-T 256 bf16 at batch 8 alone (its G+D+R1 and G+D
#        programs compile in ~315 s on that host), then +fir-matmul; a persistent compilation cache
#        (/tmp/jaxcache) lets a second call on the same warm machine skip a compile that finished
#   bash benchmarks/tpu_session.sh stylegan3-b32 OUT_DIR StyleGAN3-T 256 bf16 at batch 32 in 4 micro-batches of 8
#        (`export --micro-batch-size 8`: each phase's gradient accumulated over them, one update), which
#        a batch of 32 in one pass would need ~38 GB of HBM for
#   bash benchmarks/tpu_session.sh like-for-like OUT_DIR  Mahjong base in bf16 as the peer writes it (plain `base`:
#        an fp32 residual stream, XLA's attention) beside the bf16 peer, and `base-fast` (a bf16 stream) beside the
#        peer given that switch (`--precision bf16-stream`), at 64, 256 and 4096 (LIKE_SIZES), one run id; the
#        folders are .tpu/like/base_bf16 and base_fast_bf16 (tpu_export.sh)
#   bash benchmarks/tpu_session.sh mesh OUT_DIR      Mahjong base bf16 exported for a mesh of one device
#        (`export --devices 1`: the data-parallel program, its batch and state laid on the mesh) beside the
#        same step with no mesh, at 64, 1024 and 4096, in the order plain, mesh, mesh, plain (one run id:
#        the ratio pairs rows of one call); folders .tpu/mesh/base_bf16 and base_bf16_x1 (tpu_export.sh)
#   bash benchmarks/tpu_session.sh all OUT_DIR       mahjong, then named (one call of a borrowed chip)
# Every output line is stamped with the time of day, so a log says how long each compile took.
set -euo pipefail
part=$1 out=$2
mkdir -p "$out"
source "$(dirname "$0")/tpu_host.sh"
run="tpu-$part-$(date -u +%Y%m%dT%H%M%S)"
windows="--windows 3 --min-window-s 0.3"
bench() { python3 -m trainspeed bench --run-id "$run" --no-plot $windows "$@"; }
stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }
limited() {  # seconds, a name, then the command: stopped at the limit, and the session goes on
    local limit=$1 name=$2; shift 2
    timeout --kill-after=5 "$limit" "$@" 2>&1 | stamp || echo "$name: stopped after at most ${limit}s (exit $?)" | stamp
}
mahjong() {
    local sizes=64,1024,4096 rows=$out/tpu_mahjong_base.jsonl precision feeds
    for precision in fp32 bf16; do
        feeds=device; [ "$precision" = bf16 ] && feeds=device,host
        bench --exported ".tpu/mahjong_base_$precision" --batch-sizes $sizes --feed $feeds --out "$rows"
        python3 benchmarks/reference/jax_optax.py --size base --device tpu --precision $precision \
            --batch-sizes $sizes $windows --run-id "$run" --out "$rows"
    done
    bench --exported .tpu/mahjong_base_fast_bf16 --batch-sizes $sizes --out "$rows"
}
named() {
    local rows=$out/tpu_named_models.jsonl
    local command="python3 -m trainspeed bench --run-id $run --no-plot $windows --out $rows --exported"
    limited "${GPT2_LIMIT_S:-300}" hf:gpt2 $command .tpu/hf_gpt2_bf16
    limited "${RESNET_LIMIT_S:-240}" timm:resnet50 $command .tpu/timm_resnet50_bf16
}
attention() {
    local rows=$out/tpu_mahjong_attention.jsonl folder
    local command="python3 -m trainspeed bench --run-id $run --no-plot $windows --out $rows --exported"
    for folder in base_fast_bf16 base_fast_packed_bf16; do
        limited "${ATTN_BF16_LIMIT_S:-130}" "$folder" $command .tpu/attention/$folder --batch-sizes 64,1024,4096
    done
    for folder in base_fp32 base_packed_fp32; do
        limited "${ATTN_FP32_LIMIT_S:-65}" "$folder" $command .tpu/attention/$folder --batch-sizes 4096
    done
}
mesh() {
    local rows=$out/tpu_mesh_one_device.jsonl folder
    for folder in base_bf16 base_bf16_x1 base_bf16_x1 base_bf16; do
        bench --exported .tpu/mesh/$folder --out "$rows" 2>&1 | stamp
    done
}
fused() {  # precision, then the folders' size names (each with its own limit, FUSED_LIMIT_S)
    local precision=$1 rows=$out/tpu_mahjong_fused_$1.jsonl sizes=${FUSED_SIZES:-64,256,1024,4096} folder
    local command="python3 -m trainspeed bench --run-id $run --no-plot $windows --out $rows --exported"
    [ "${FUSED_KERNEL:-1}" = 0 ] || limited 120 kernel python3 benchmarks/qkv_attention_kernel.py --batch-sizes $sizes \
        --precisions "$([ "$precision" = bf16 ] && echo bfloat16 || echo float32)" --out "$out/tpu_qkv_attention_kernel_$precision.jsonl"
    for folder in "${@:2}"; do
        limited "${FUSED_LIMIT_S:-150}" "$folder" $command ".tpu/fused/$folder" --batch-sizes $sizes
    done
    limited "${PEER_LIMIT_S:-220}" peer python3 benchmarks/reference/jax_optax.py --size base --device tpu \
        --precision "$precision" --batch-sizes $sizes $windows --run-id "$run" --out "$rows"
}
like_for_like() {
    local rows=$out/tpu_mahjong_like_for_like.jsonl sizes=${LIKE_SIZES:-64,256,4096} folder precision
    local command="python3 -m trainspeed bench --run-id $run --no-plot $windows --out $rows --exported"
    for folder in base_bf16 base_fast_bf16; do
        limited "${LIKE_LIMIT_S:-110}" "$folder" $command ".tpu/like/$folder" --batch-sizes $sizes
    done
    for precision in bf16 bf16-stream; do
        limited "${PEER_LIMIT_S:-110}" "peer $precision" python3 benchmarks/reference/jax_optax.py --size base \
            --device tpu --precision $precision --batch-sizes $sizes $windows --run-id "$run" --out "$rows"
    done
}
stylegan3() {
    local rows=$out/tpu_stylegan3_t256.jsonl
    local command="python3 -m trainspeed bench --run-id $run --no-plot --out $rows --windows 3 --min-window-s 0.001
        --min-steps-per-window 16 --max-steps-per-window 16 --exported"
    limited "${SG3_LIMIT_S:-240}" t256 $command .tpu/stylegan3_t256_bf16 --feed device,host
    limited "${SG3_FIR_LIMIT_S:-170}" t256+fir-matmul $command .tpu/stylegan3_t256_fir_bf16
    limited "${SG3_NORECOMPUTE_LIMIT_S:-140}" t256+recompute-none $command .tpu/stylegan3_t256_norecompute_bf16
}
stylegan3_b8() {
    export JAX_COMPILATION_CACHE_DIR=/tmp/jaxcache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
    local command="python3 -m trainspeed bench --run-id $run --no-plot --out $out/tpu_stylegan3_t256.jsonl --windows 2
        --min-window-s 0.001 --min-steps-per-window 16 --max-steps-per-window 16 --feed device --exported"
    limited "${SG3_B8_LIMIT_S:-560}" t256-b8 $command .tpu/sg3_t256_b8
    limited "${SG3_FIR_B8_LIMIT_S:-500}" t256+fir-matmul-b8 $command .tpu/sg3_t256_fir_b8
}
stylegan3_b32() {  # batch 32 as 4 micro-batches of 8 (export --micro-batch-size 8), as StyleGAN3's own --batch-gpu
    export JAX_COMPILATION_CACHE_DIR=/tmp/jaxcache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
    limited "${SG3_B32_LIMIT_S:-570}" t256-b32-mb8 python3 -m trainspeed bench --run-id "$run" --no-plot \
        --out "$out/tpu_stylegan3_t256.jsonl" --windows 2 --min-window-s 0.001 --min-steps-per-window 16 \
        --max-steps-per-window 16 --feed device --exported .tpu/sg3_t256_b32_mb8
}
profile() {
    local work=/tmp/tpu_profile
    limited "${PROFILE_LIMIT_S:-300}" profile python3 benchmarks/tpu_profile.py measure \
        --exported .tpu/mahjong_base_fp32 --exported .tpu/mahjong_base_bf16 --batch-sizes 64,1024,4096 --out $work
    [ -d $work/raw ] && tar czf "$out/tpu_profile_raw.tar.gz" -C $work raw
    [ -e $work/summary.json ] && cp $work/summary.json $work/summary.md "$out"/
    true
}
case $part in
mahjong) mahjong ;;
named) named ;;
profile) profile ;;
attention) attention ;;
fused-bf16) fused bf16 ${FUSED_FOLDERS:-base_fast_bf16 base_fast_fused_bf16} ;;
fused-fp32) fused fp32 ${FUSED_FOLDERS:-base_fp32 base_fused_fp32} ;;
like-for-like) like_for_like ;;
mesh) mesh ;;
stylegan3) stylegan3 ;;
stylegan3-b8) stylegan3_b8 ;;
stylegan3-b32) stylegan3_b32 ;;
all) mahjong; named ;;
*) echo "usage: bash benchmarks/tpu_session.sh mahjong|named|profile|attention|fused-bf16|fused-fp32|like-for-like|mesh|stylegan3|stylegan3-b8|stylegan3-b32|all OUT_DIR" >&2; exit 2 ;;
esac
