#!/usr/bin/env bash
# One TPU session's measurements, run on the TPU host from the repository root, after
# benchmarks/tpu_export.sh made .tpu/ and .whl-tpu/ here. Nothing on this path imports torch.
#   bash benchmarks/tpu_session.sh mahjong OUT_DIR   trainspeed's exported Mahjong base step, fp32 and
#        bf16 (device- and host-fed) and base-fast, beside the hand-written JAX peer at the same
#        batches, one run id, the chip's matmul peak in every row
#   bash benchmarks/tpu_session.sh named OUT_DIR     hf:gpt2 and timm:resnet50 at three batch sizes
#   bash benchmarks/tpu_session.sh all OUT_DIR       both, in that order (one call of a borrowed chip)
set -euo pipefail
part=$1 out=$2
mkdir -p "$out"
export PYTHONUNBUFFERED=1
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl-tpu/*.whl
export PYTHONPATH=${PYTHONPATH:-}:/tmp/site
run="tpu-$part-$(date -u +%Y%m%dT%H%M%S)"
windows="--windows 3 --min-window-s 0.3"
bench() { python3 -m trainspeed bench --run-id "$run" --no-plot $windows "$@"; }
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
    bench --exported .tpu/hf_gpt2_bf16 --out "$out/tpu_named_models.jsonl"
    bench --exported .tpu/timm_resnet50_bf16 --out "$out/tpu_named_models.jsonl"
}
case $part in
mahjong) mahjong ;;
named) named ;;
all) mahjong; named ;;
*) echo "usage: bash benchmarks/tpu_session.sh mahjong|named|all OUT_DIR" >&2; exit 2 ;;
esac
