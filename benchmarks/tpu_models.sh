#!/usr/bin/env bash
# The models users bring, on one TPU v5e chip: each exported here for the TPU (bf16, scan-layers, and
# remat where a model's memory needs it; parameters drawn on the device), then benched there, with the
# hand-written JAX peers of GPT-2 and ViT-S/16 (benchmarks/reference/jax_transformers.py) in the same run.
#   bash benchmarks/tpu_models.sh export            here: .tpu/models/NAME for every model below (skips a folder
#                                                   already made), and the wheels that host lacks in .whl-tpu/
#   bash benchmarks/tpu_models.sh bench OUT [NAMES] on the TPU host, from the repository root: each folder (or
#                                                   the comma-separated NAMES) under its own time limit, one run
#                                                   id, rows into OUT/tpu_models.jsonl, the log stamped by time
#   RUN=ID names one run id for both (a ratio pairs rows of one run); LIMIT_S=N holds every folder to N seconds
#   bash benchmarks/tpu_models.sh peers OUT [NAMES] on the TPU host: the JAX peers of gpt2 and vit_s16 (or NAMES),
#                                                   each at its trainspeed folder's batch sizes and FLOPs
set -euo pipefail
cd "$(dirname "$0")/.."
TRAINSPEED=${TRAINSPEED:-.venv/bin/trainspeed}
# name | workload | size | target | batch sizes | time limit on the chip (s)
MODELS="
gpt2|hf:gpt2|base,attn_pdrop=0,embd_pdrop=0,resid_pdrop=0|jax:jit:bf16:scan-layers+remat|8,16|150
gpt2_full|hf:gpt2|base,attn_pdrop=0,embd_pdrop=0,resid_pdrop=0|jax:jit:bf16:scan-layers+remat-full|16,32|150
gpt2_bf16c|hf:gpt2|base,attn_pdrop=0,embd_pdrop=0,resid_pdrop=0|jax:jit:bf16:scan-layers+remat+bf16-compute|16,32|150
gpt2_full_bf16c|hf:gpt2|base,attn_pdrop=0,embd_pdrop=0,resid_pdrop=0|jax:jit:bf16:scan-layers+remat-full+bf16-compute|32,64|150
vit_s16|timm:vit_small_patch16_224|base,opt=adamw|jax:jit:bf16:scan-layers+remat|64,256|120
vit_s16_unscanned|timm:vit_small_patch16_224|base,opt=adamw|jax:jit:bf16|64,256|160
vit_s16_bf16c|timm:vit_small_patch16_224|base,opt=adamw|jax:jit:bf16:bf16-compute|64,256|160
resnet50|timm:resnet50|base|jax:jit:bf16:scan-layers+remat|128,256|180
resnet50_unscanned|timm:resnet50|base|jax:jit:bf16|128,256|150
resnet50_bf16c|timm:resnet50|base|jax:jit:bf16:bf16-compute|128,256|150
mahjong_base|mahjong|base-fast+attn-fused-qkv+flat-tokens|jax:jit:bf16:scan-layers+remat|256,1024|120
mahjong_base_unscanned|mahjong|base-fast+attn-fused-qkv+flat-tokens|jax:jit:bf16|256,1024|120
bert|hf:bert|base,attention_probs_dropout_prob=0,hidden_dropout_prob=0|jax:jit:bf16:scan-layers+remat|16,32|120
llama_300m|hf:llama|base,hidden_size=1024,num_hidden_layers=16,num_attention_heads=16,num_key_value_heads=16,intermediate_size=2816,vocab_size=32000,max_position_embeddings=1024,seq=1024|jax:jit:bf16:scan-layers+remat|8,16|180
llama_1b|hf:llama|base,hidden_size=2048,num_hidden_layers=22,num_attention_heads=32,num_key_value_heads=4,intermediate_size=5632,vocab_size=32000,max_position_embeddings=1024,seq=1024|jax:jit:bf16:scan-layers+remat+bf16-state|4,8|240
convnext_tiny|timm:convnext_tiny|base,opt=adamw|jax:jit:bf16|64,128|150
efficientnet_b0|timm:efficientnet_b0|base|jax:jit:bf16:scan-layers+remat|128,256|150
deit_small|timm:deit_small_patch16_224|base,opt=adamw|jax:jit:bf16:scan-layers+remat|64,256|120
mobilenetv3|timm:mobilenetv3_large_100|base|jax:jit:bf16:scan-layers+remat|128,256|120
swin_tiny|timm:swin_tiny_patch4_window7_224|base,opt=adamw|jax:jit:bf16:scan-layers+remat|64,128|150
distilbert|hf:distilbert|base,dropout=0,attention_dropout=0|jax:jit:bf16:scan-layers+remat|16,32|120
roberta|hf:roberta|base,seq=512,attention_probs_dropout_prob=0,hidden_dropout_prob=0|jax:jit:bf16:scan-layers+remat|16,32|120
"
fields() { echo "$MODELS" | grep "^$1|" | cut -d'|' -f"$2"; }
names() { echo "$MODELS" | grep -v '^$' | cut -d'|' -f1; }

export_all() {
    mkdir -p .tpu/models
    for name in $(names); do
        [ -e ".tpu/models/$name" ] || "$TRAINSPEED" export --platform tpu --initial-state drawn \
            --workload "$(fields "$name" 2)" --size "$(fields "$name" 3)" --target "$(fields "$name" 4)" \
            --batch-sizes "$(fields "$name" 5)" --batch-rows 8 --out ".tpu/models/$name"
    done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
        --platform manylinux2014_x86_64 -d .whl-tpu dacite==1.9.2 flatbuffers==25.12.19 optax==0.2.8 absl-py==2.5.1 \
        psutil==7.2.2
}

stamp() { while IFS= read -r line; do printf '%(%H:%M:%S)T %s\n' -1 "$line"; done; }

bench_all() {
    local out=$1 chosen=${2:-$(names | paste -sd,)}
    mkdir -p "$out"
    source benchmarks/tpu_host.sh
    local run=${RUN:-tpu-models-$(date -u +%Y%m%dT%H%M%S)}
    for name in ${chosen//,/ }; do
        local limit=${LIMIT_S:-$(fields "$name" 6)}
        timeout --kill-after=5 "$limit" python3 -m trainspeed bench --exported ".tpu/models/$name" \
            --run-id "$run" --no-plot --windows 3 --min-window-s 0.3 --out "$out/tpu_models.jsonl" 2>&1 | stamp \
            || echo "$name: stopped after at most $limit s (exit $?)" | stamp
    done
}

peers() {
    local out=$1 chosen=${2:-gpt2,vit_s16}
    mkdir -p "$out"
    source benchmarks/tpu_host.sh
    local run=${RUN:-tpu-peers-$(date -u +%Y%m%dT%H%M%S)}
    declare -A folder_of=([gpt2]=gpt2_full [vit_s16]=vit_s16)
    for model in ${chosen//,/ }; do
        local pair=$model:${folder_of[$model]}
        local model=${pair%%:*} folder=${pair##*:}
        timeout --kill-after=5 "$(fields "$folder" 6)" python3 benchmarks/reference/jax_transformers.py --model "$model" \
            --device tpu --precision bf16 --batch-sizes "$(fields "$folder" 5)" \
            --flops-from ".tpu/models/$folder/manifest.json" --run-id "$run" --out "$out/tpu_models.jsonl" 2>&1 | stamp \
            || echo "$model peer: stopped (exit $?)" | stamp
    done
}

case ${1:-} in
    export) export_all ;;
    bench) bench_all "${2:?OUT}" "${3:-}" ;;
    peers) peers "${2:?OUT}" "${3:-}" ;;
    *) echo "usage: bash benchmarks/tpu_models.sh export | bench OUT [NAMES] | peers OUT" >&2; exit 2 ;;
esac
