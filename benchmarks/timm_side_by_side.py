"""trainspeed's bench beside timm's own `benchmark.py` on one model, batch, precision and target.

timm's repository ships `benchmark.py` (inference and training throughput of any timm model by
name). It is not part of the timm package, so this script runs a copy the user takes from the timm
repository at the tag of the installed timm, in a child process; it is never copied here. Both
tools then measure the same training step in turns, round after round, under one thread count,
so each round's ratio pairs two measurements taken seconds apart on one machine:

    git clone --depth 1 --branch v1.0.28 https://github.com/huggingface/pytorch-image-models timm-repo
    python benchmarks/timm_side_by_side.py --timm-benchmark timm-repo/benchmark.py \
        --model resnet50 --img-size 64 --batch-size 16 --out docs/results/timm_side_by_side.jsonl

What each side runs: timm trains its model on a float32 batch it keeps on the device, with its own
SGD (momentum 0.9, Nesterov, no weight decay) and cross-entropy, timing `--num-bench-iter` steps
after `--num-warm-iter`. trainspeed's `timm:MODEL` (feed `device`: the batch stays on the
device) trains the same network with SGD (momentum 0.9, Nesterov, weight decay 1e-4) on uint8
pixels it normalizes inside the step, timing the median of its windows. A row per round records
both samples/s and their ratio; a last row the median ratio.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainspeed.bench.measurement import MeasurementRow
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.user_json import loads

BENCHMARK = "timm-side-by-side"


@dataclass(frozen=True)
class Round:
    round: int
    model: str
    img_size: int
    num_classes: int
    batch_size: int
    threads: int
    target: str
    timm_version: str
    timm_samples_per_s: float
    trainspeed_samples_per_s: float
    trainspeed_over_timm: float


@dataclass(frozen=True)
class Summary:
    model: str
    rounds: int
    median_trainspeed_over_timm: float
    lowest: float
    highest: float


def child_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PJRT_DEVICE": "CPU"}


def run(argv: list[str], threads: int) -> None:
    result = subprocess.run(argv, env=child_env(threads), capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"timm_side_by_side: `{shlex.join(argv)}` failed ({result.returncode}): {last}")


def timm_samples_per_s(args: argparse.Namespace, scratch: Path) -> float:
    results = scratch / "timm.json"
    run([sys.executable, str(args.timm_benchmark), "--bench", "train", "--device", "cpu", "--model", args.model,
         "--img-size", str(args.img_size), "--num-classes", str(args.num_classes), "-b", str(args.batch_size),
         "--num-warm-iter", str(args.warmup_steps), "--num-bench-iter", str(args.steps),
         "--results-file", str(results), "--results-format", "json"], args.threads)
    return float(loads(results.read_text())["train_samples_per_sec"])


def trainspeed_samples_per_s(args: argparse.Namespace, scratch: Path) -> float:
    rows = scratch / "trainspeed.jsonl"
    rows.unlink(missing_ok=True)
    run([sys.executable, "-m", "trainspeed", "bench", "--workload", f"timm:{args.model}",
         "--size", f"tiny,res={args.img_size},classes={args.num_classes}", "--targets", args.target,
         "--batch-sizes", str(args.batch_size), "--threads", str(args.threads), "--warmup-steps", str(args.warmup_steps),
         "--windows", "3", "--min-steps-per-window", str(max(1, args.steps // 3)), "--feed", "device",
         "--out", str(rows), "--no-plot", "--no-progress"], args.threads)
    (row,) = [loads(line) for line in rows.read_text().splitlines()]
    if row["status"] != "ok":
        raise SystemExit(f"timm_side_by_side: trainspeed's row is {row['status']}: {row.get('error')}")
    return float(row["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timm-benchmark", type=Path, required=True, help="benchmark.py of the timm repository")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps of timm's run (trainspeed: 3 windows of a third)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", default="cpu:eager:fp32", help="trainspeed's target (timm's: --device cpu, float32)")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file the rows are appended to")
    args = parser.parse_args()
    if not args.timm_benchmark.is_file():
        raise SystemExit(f"timm_side_by_side: {args.timm_benchmark} is not a file; take benchmark.py from the timm repository")
    import timm

    command = shlex.join(["python", "benchmarks/timm_side_by_side.py", *sys.argv[1:]])
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.rounds):
            timm_speed = timm_samples_per_s(args, Path(folder))
            ours = trainspeed_samples_per_s(args, Path(folder))
            rounds.append(Round(number, args.model, args.img_size, args.num_classes, args.batch_size, args.threads,
                                args.target, timm.__version__, timm_speed, ours, ours / timm_speed))
            print(f"round {number}: timm {timm_speed:.2f} samples/s, trainspeed {ours:.2f} ({ours / timm_speed:.3f}x)")
    ratios = [r.trainspeed_over_timm for r in rounds]
    summary = Summary(args.model, len(rounds), statistics.median(ratios), min(ratios), max(ratios))
    print(f"median trainspeed / timm: {summary.median_trainspeed_over_timm:.3f} ({summary.lowest:.3f}..{summary.highest:.3f})")
    machine = Machine.at_start()
    for values in (*rounds, summary):
        append_row(args.out, MeasurementRow.of(BENCHMARK, values, command, machine))


if __name__ == "__main__":
    main()
