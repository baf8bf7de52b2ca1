# What the benchmark scripts that plan and check on the committed studies' data share. Sourced;
# needs REPO (the checkout).

# The commands and folders they use: T (trainspeed), PYTHON, RESULTS, the examples importable and
# CHARLM (the char-LM example's workload); then the working folder WORK made and entered.
work_in() {  # WORK
    T=${TRAINSPEED:-$REPO/.venv/bin/trainspeed}
    PYTHON=${PYTHON:-$REPO/.venv/bin/python}
    RESULTS=$REPO/docs/results
    export PYTHONPATH=$REPO/examples${PYTHONPATH:+:$PYTHONPATH}
    CHARLM=char_lm_workload:CharLMWorkload
    mkdir -p "$1"
    cd "$1"
}

# Each run folder's summary.json and metrics.jsonl copied into KEPT at its path below FROM (a
# folder without a summary.json, or a pattern that matched none, is passed over): the run folders
# a result keeps beside its rows.
keep_runs() {  # KEPT FROM RUN_FOLDER...
    local kept=$1 from=$2 run
    shift 2
    for run in "$@"; do
        [ -f "$run/summary.json" ] || continue
        mkdir -p "$kept/${run#"$from"}"
        cp "$run/summary.json" "$run/metrics.jsonl" "$kept/${run#"$from"}/"
    done
}

# The committed studies' data, made in the working folder where it is missing: 200 self-play games
# (seed 0) and the text (`text_data`).
study_data() {
    [ -f data/mahjong/index.json ] || "$T" data mahjong-selfplay --games 200 --workers 2 --out data/mahjong --seed 0 --no-progress
    text_data
}

# The first 200 standard-library sources as characters (the char-LM example), in data/text where missing.
text_data() {
    if [ ! -d data/text ]; then
        "$PYTHON" "$REPO/examples/char_lm_workload.py" text.npz --files 200
        "$T" data from-arrays text.npz --out data/text --split-by document --val-fraction 0.1
    fi
}

# A base run to its goal as the plan checks make it, where OUT holds none yet: its recipe's learning
# rate (LR-FLAGS), warm-up and validations counted in samples, its noise scale from 2 micro-batches,
# one thread, seed 0; what it prints goes to LOG.
goal_base_run() {  # OUT LOG WORKLOAD SIZE DATA GOAL BATCH MAX_SAMPLES EVAL_SAMPLES VAL_SAMPLES WARMUP_SAMPLES LR-FLAGS...
    local out=$1 log=$2 workload=$3 size=$4 data=$5 goal=$6 batch=$7 samples=$8 every=$9 val=${10} warmup=${11}
    shift 11
    [ -f "$out/summary.json" ] || "$T" train --workload "$workload" --size "$size" --data "$data" \
        --batch-size-per-device "$batch" --samples "$samples" --until "$goal" --stop-at-target \
        --eval-every-samples "$every" --eval-batches $(( val / batch )) --warmup-steps $(( warmup / batch )) \
        --min-lr-ratio 1 --noise-scale-micro-batches 2 --log-every 16 --threads 1 --seed 0 --checkpoint-every 0 \
        --no-progress "$@" --out "$out" > "$log"
}

# The char-LM example's base run: batch 32 at the committed study's best rate there (0.0226).
charlm_base_run() {  # OUT LOG
    goal_base_run "$1" "$2" "$CHARLM" tiny data/text 'val/bits_per_char<=3.6' 32 262144 2048 1024 2048 \
        --lr 0.0226 --lr-scaling sqrt --lr-reference-batch 32
}

# The time-to-target study of hf:gpt2 (tiny, seq=65) on the char-LM example's data (data/text),
# where OUT holds none yet: global batches 8, 32 and 128, learning-rate factors about 1e-3 at 32,
# 2 seeds.
gpt2_time_to_target_study() {  # OUT
    [ -f "$1/time_to_target.jsonl" ] || "$T" study time-to-target --workload hf:gpt2 --size tiny,seq=65 \
        --data data/text --until 'val/loss<=2.9' --global-batches 8,32,128 --seeds 2 --base-lr 1e-3 --reference-batch 32 \
        --lr-factors 0.5,1,2 --max-samples 40960 --eval-every-samples 1024 --val-samples 1024 --warmup-samples 1024 \
        --no-progress --out "$1"
}
