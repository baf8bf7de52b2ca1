"""Harness overhead: `trainspeed bench` samples/s vs a minimal hand-written loop of the same step.

Both run in one process, interleaved in alternating order (bench then loop, loop then bench, ...)
so neither always runs first, with the same model,
optimizer, batch and thread count, so machine noise hits both alike. The ratio of the medians
of each interleaved (bench, loop) pair is the harness overhead; the median over pairs is reported
(pairs cancel slow drifts of a shared machine). The goal is within 3%.

    .venv/bin/python benchmarks/bench_harness_overhead.py --size tiny --batch-size 256 --threads 1
"""

from __future__ import annotations

import argparse
import functools
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.bench.sweep import run_sweep
from trainspeed.machine import Machine
from trainspeed.rows import row_line
from trainspeed.workloads.mahjong.model import SIZES, MahjongPolicy
from trainspeed.workloads.mahjong.workload import (
    BETAS,
    LEARNING_RATE,
    WEIGHT_DECAY,
    MahjongWorkload,
)


def hand_written_loop(size: str, batch_size: int, warmup_steps: int, steps: int, windows: int) -> float:
    """The plainest loop a user would write: median samples/s over `windows` windows."""
    torch.manual_seed(0)
    model = MahjongPolicy(SIZES[size])
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=BETAS, weight_decay=WEIGHT_DECAY)
    batch = MahjongWorkload().synthetic_batch(size, batch_size, torch.Generator().manual_seed(0))
    features, mask, action = batch["features"], batch["mask"], batch["action"]
    rates = []
    for window in range(windows + 1):
        start = time.perf_counter()
        for _ in range(warmup_steps if window == 0 else steps):
            _, loss = model(features, mask, action)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if window:
            rates.append(batch_size * steps / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_harness(size: str, batch_size: int, plan: TimingPlan, out: Path) -> tuple[float, int]:
    config = BenchConfig(
        workload="mahjong", size=size, targets=["cpu:eager:fp32"], batch_sizes=[batch_size], out=out, plan=plan,
        peak_tflops=1.0,
    )
    (row,) = run_sweep(config)
    assert row.status == "ok", row
    return row.samples_per_s, row.steps_per_window


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--min-window-s", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("results/harness_overhead.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    plan = TimingPlan(warmup_steps=3, windows=args.windows, min_window_s=args.min_window_s)
    machine = Machine.at_start()
    bench_rates, loop_rates = [], []
    with tempfile.TemporaryDirectory() as scratch:
        rows = Path(scratch) / "rows.jsonl"
        _, steps = bench_harness(args.size, args.batch_size, plan, rows)  # window length for the loop
        run_loop = functools.partial(hand_written_loop, args.size, args.batch_size, plan.warmup_steps, steps, plan.windows)
        for round_index in range(args.rounds):
            if round_index % 2:
                loop_rates.append(run_loop())
                bench_rates.append(bench_harness(args.size, args.batch_size, plan, rows)[0])
            else:
                bench_rates.append(bench_harness(args.size, args.batch_size, plan, rows)[0])
                loop_rates.append(run_loop())
            print(f"round {round_index}: bench {bench_rates[-1]:,.0f}  loop {loop_rates[-1]:,.0f} samples/s")
    per_round = [b / l for b, l in zip(bench_rates, loop_rates)]
    summary = {
        "workload": "mahjong", "size": args.size, "target": "cpu:eager:fp32", "batch_size": args.batch_size,
        "bench_samples_per_s": bench_rates, "loop_samples_per_s": loop_rates,
        "bench_over_loop_median_of_pairs": statistics.median(per_round),
        "bench_over_loop_ratio_of_medians": statistics.median(bench_rates) / statistics.median(loop_rates),
        "bench_over_loop_per_round": per_round,
    }
    command = shlex.join(["python", "benchmarks/bench_harness_overhead.py", *(sys.argv[1:] if argv is None else argv)])
    atomic_write_text(args.out, row_line(MeasurementRow.of("harness-overhead", summary, command, machine.at_end())) + "\n")
    print(f"bench / loop = {summary['bench_over_loop_median_of_pairs']:.4f} median of pairs (per round: "
          + ", ".join(f"{r:.3f}" for r in per_round) + f") -> {args.out}")


if __name__ == "__main__":
    main()
