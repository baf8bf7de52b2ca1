"""The TPU training runs beside the same goal on the CPU (`benchmarks/cpu_same_goal.sh`): one table
in Markdown on stdout, and its rows as JSON Lines beside it (RESULTS/tpu_vs_cpu_same_goal.jsonl).

    python benchmarks/same_goal_table.py docs/results > docs/results/tpu_vs_cpu_same_goal.md

The ratios pair runs of the same data, goal, seed and batch; the TPU and the CPU runs ran on two
machines at two times, each alone on its machine (the rows say which and how loaded)."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.rows import row_line  # noqa: E402
from trainspeed.train.runs import read_run_summary  # noqa: E402

RUNS = {"TPU, exported steps": "tpu_train_mahjong_tiny_b{batch}",
        "CPU, exported steps (JAX)": "cpu_train_mahjong_tiny_exported_b{batch}",
        "CPU, cpu:eager:fp32 (torch)": "cpu_train_mahjong_tiny_eager_b{batch}"}
BATCHES = (64, 256)
BENCHMARK = "tpu-vs-cpu-same-goal"
"""The `benchmark` of this script's `measurement` rows (each run's own machine is in its `machine` value)."""


@dataclass(frozen=True)
class GoalRow:
    run: str
    batch: int
    folder: str
    machine: str
    reached: bool
    step: int | None
    samples: int | None
    train_s: float | None
    wall_s: float | None
    steady_samples_per_s: float | None
    tpu_train_s_ratio: float | None
    """This run's training seconds to the goal over the TPU run's at the same batch (> 1: the TPU is faster)."""


def _machine(summary) -> str:
    machine = summary.machine
    device = (summary.data or {}).get("device") if isinstance(summary.data, dict) else None
    where = device if device and device != "cpu" else machine.cpu_model
    threads = f", {machine.torch_threads} torch threads" if machine.torch_threads else ""
    return (f"{where}, {machine.cores_usable} of {machine.cores_total} cores{threads}, load "
            f"{machine.load_average_start:.1f} to {machine.load_average_end:.1f}")


def rows(results: Path) -> list[GoalRow]:
    found: list[GoalRow] = []
    for batch in BATCHES:
        tpu = read_run_summary(results / RUNS["TPU, exported steps"].format(batch=batch)).time_to_target
        for name, pattern in RUNS.items():
            folder = pattern.format(batch=batch)
            summary = read_run_summary(results / folder)
            goal = summary.time_to_target
            reached = bool(goal and goal.reached)
            ratio = goal.train_s / tpu.train_s if reached and tpu and tpu.reached else None
            found.append(GoalRow(name, batch, folder, _machine(summary), reached, goal.step if reached else None,
                                 goal.samples if reached else None, goal.train_s if reached else None,
                                 goal.wall_s if reached else None, summary.steady_samples_per_s, ratio))
    return found


def table(found: list[GoalRow]) -> str:
    lines = ["| run | batch | reached at step | samples | train s to the goal | wall s to the goal | steady samples/s | "
             "train s / the TPU's | machine |", "|---|---|---|---|---|---|---|---|---|"]
    for row in found:
        cells = [row.run, str(row.batch), f"{row.step:,}" if row.step else "not reached",
                 f"{row.samples:,}" if row.samples else "", f"{row.train_s:.1f}" if row.train_s else "",
                 f"{row.wall_s:.1f}" if row.wall_s else "",
                 f"{row.steady_samples_per_s:,.0f}" if row.steady_samples_per_s else "",
                 f"{row.tpu_train_s_ratio:.1f}x" if row.tpu_train_s_ratio else "", row.machine]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the folder of the run folders (docs/results)")
    args = parser.parse_args()
    found = rows(args.results)
    command = shlex.join(["python", "benchmarks/same_goal_table.py", "docs/results"])
    # no machine of its own: the rows come from runs on two machines, each named in its `machine` value
    atomic_write_text(args.results / "tpu_vs_cpu_same_goal.jsonl", "".join(
        row_line(MeasurementRow(BENCHMARK, asdict(row), command, timestamp=None, machine=None)) + "\n" for row in found))
    print("Tiny Mahjong on 200 self-play games (seed 0) to 85% validation accuracy, a validation every\n"
          "8,192 samples on 8 batches (`bash benchmarks/cpu_same_goal.sh`; the TPU rows from\n"
          "`benchmarks/tpu_train.sh goal`). Train s and wall s are the run's own, to the validation that\n"
          "met the goal; the TPU's include its program's compile and load in the first window.\n")
    print(table(found), end="")


if __name__ == "__main__":
    main()
