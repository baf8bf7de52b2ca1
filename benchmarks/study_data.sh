# The committed studies' data, made in the working folder where it is missing: 200 self-play games
# (seed 0) and the first 200 standard-library sources as characters (the char-LM example).
# Sourced by the benchmark scripts that plan and check on it; needs T (trainspeed), PYTHON and REPO.
study_data() {
    [ -f data/mahjong/index.json ] || "$T" data mahjong-selfplay --games 200 --workers 2 --out data/mahjong --seed 0 --no-progress
    if [ ! -d data/text ]; then
        "$PYTHON" "$REPO/examples/char_lm_workload.py" text.npz --files 200
        "$T" data from-arrays text.npz --out data/text --split-by document --val-fraction 0.1
    fi
}
