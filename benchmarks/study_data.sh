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

# The committed studies' data, made in the working folder where it is missing: 200 self-play games
# (seed 0) and the first 200 standard-library sources as characters (the char-LM example).
study_data() {
    [ -f data/mahjong/index.json ] || "$T" data mahjong-selfplay --games 200 --workers 2 --out data/mahjong --seed 0 --no-progress
    if [ ! -d data/text ]; then
        "$PYTHON" "$REPO/examples/char_lm_workload.py" text.npz --files 200
        "$T" data from-arrays text.npz --out data/text --split-by document --val-fraction 0.1
    fi
}
