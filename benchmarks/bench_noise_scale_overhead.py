"""The gradient noise scale's cost on N ranks: `trainspeed train` samples/s without and with the meter.

`trainspeed bench --noise-scale off,on` measures the one-rank meter (one process, side by side).
The N-rank meter lives in the data-parallel trainer (DDP's communication hook and an optimizer
pre-hook), so it is measured there: pairs of `--synthetic-data` runs, off then on, then on then off,
... (neither always goes first), each run's steady samples/s from its summary. The cost is the
median over pairs of on/off; the goal is within 3%. Every run is a real torchrun job.

    .venv/bin/python benchmarks/bench_noise_scale_overhead.py --nproc 2 --batch-size-per-device 256 \\
        --steps 120 --pairs 5 --out docs/results/noise_scale_overhead.jsonl
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.machine import Machine
from trainspeed.rows import row_line
from trainspeed.train.runs import read_run_summary


def train_samples_per_s(args: argparse.Namespace, noise_scale: str, out: Path) -> float:
    command = [sys.executable, "-m", "trainspeed", "train", "--workload", args.workload, "--size", args.size,
               "--synthetic-data", "--nproc", str(args.nproc), "--batch-size-per-device", str(args.batch_size_per_device),
               "--steps", str(args.steps), "--threads", str(args.threads), "--num-workers", "0", "--log-every", "10",
               "--timing-warmup-steps", "10", "--no-progress", "--noise-scale", noise_scale, "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"bench_noise_scale_overhead: {shlex.join(command)} failed: {result.stderr.strip()[-500:]}")
    steady = read_run_summary(out).steady_samples_per_s
    if steady is None:
        raise SystemExit(f"bench_noise_scale_overhead: {out} ran too few steps for a steady samples/s; give more --steps")
    return steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mahjong")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--batch-size-per-device", type=int, default=256)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    machine = Machine.at_start()
    command = shlex.join(["python", *sys.argv])
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(args.pairs):
            order = ("off", "on") if pair % 2 == 0 else ("on", "off")
            rates = {variant: train_samples_per_s(args, variant, Path(scratch) / f"{pair}-{variant}") for variant in order}
            rows.append({"pair": pair, "first": order[0], "workload": args.workload, "size": args.size,
                         "ranks": args.nproc, "batch_size_per_device": args.batch_size_per_device, "steps": args.steps,
                         "threads": args.threads, "off_samples_per_s": rates["off"], "on_samples_per_s": rates["on"],
                         "on_over_off": rates["on"] / rates["off"]})
            print(f"pair {pair}: off {rates['off']:,.0f} on {rates['on']:,.0f} samples/s, "
                  f"on/off {rates['on'] / rates['off']:.4f}", flush=True)
    ratio = statistics.median(row["on_over_off"] for row in rows)
    summary = {"pair": "median", "workload": args.workload, "size": args.size, "ranks": args.nproc,
               "batch_size_per_device": args.batch_size_per_device, "steps": args.steps, "threads": args.threads,
               "on_over_off": ratio}
    ended = machine.at_end()
    lines = [row_line(MeasurementRow.of("noise-scale-overhead", values, command, ended)) for values in [*rows, summary]]
    atomic_write_text(args.out, "".join(line + "\n" for line in lines))
    print(f"{args.out}: median on/off {ratio:.4f} over {args.pairs} pairs (cost {1 - ratio:+.1%})")


if __name__ == "__main__":
    main()
