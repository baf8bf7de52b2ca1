"""What the one-rank noise-scale meter costs per training step, plain and metered side by side.

    PYTHONPATH=examples python benchmarks/bench_noise_scale_cost.py --threads 1 --repeats 15 \\
        --out docs/results/noise_scale_cost.jsonl

For each workload at its reference batch (`--case NAME=WORKLOAD:SIZE:BATCH`; by default tiny
Mahjong at 32, the char-LM example at 32 and the small CNN example at 64, the fastest fixed batches
to their goals) one process builds one trainable per variant, all from the same seed:

- `plain`: no meter, the step as `--noise-scale off` runs it;
- `micro-batches/K`: the meter of `--noise-scale-micro-batches 2 --noise-scale-every K` (K = 32:
  its default; 1: every step, as before `--noise-scale-every`);
- `previous-step`: the meter of a one-rank run without micro-batches (its default method), which
  measures every step.

Each variant steps the way the trainer's loop does (`NoiseScaleMeter.split`, then
`GradientAccumulation.run` over the target's step, a window read every `--log-every` steps) on the
same pool of synthetic batches. The variants take turns of `--turn` steps, the order rotated at
each turn, so a change of the machine's load within a second hits every variant alike, while each
turn runs on caches its own steps warmed (a turn of one step would time every variant on caches
the others filled); each turn is timed with a device sync on either side. A repeat is `--block` steps of each variant
(a multiple of every K, so each metered block holds its share of measured steps). A variant's
cost is the median over repeats of its block's seconds over the plain block's of the same repeat,
minus 1, with the 2.5% and 97.5% percentiles of a bootstrap of those ratios. Every row records the torch threads, the machine's cores and its load average before and
after its repeat: on a machine shared with other jobs the load moves the times, not the ratios of
blocks run back to back.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.gradients.accumulation import GradientAccumulation  # noqa: E402
from trainspeed.gradients.modes import DEFAULT_MEASURE_EVERY  # noqa: E402
from trainspeed.gradients.noise_scale import NoiseScaleMeter  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import row_line  # noqa: E402
from trainspeed.targets import get_target  # noqa: E402
from trainspeed.targets.base import Target  # noqa: E402
from trainspeed.workloads import get_workload  # noqa: E402
from trainspeed.workloads.base import Batch, Trainable  # noqa: E402

BENCHMARK = "noise-scale-cost"
DEFAULT_CASES = ("mahjong-tiny=mahjong:tiny:32", "char-lm=char_lm_workload:CharLMWorkload:tiny:32",
                 "small-cnn=small_cnn_workload:SmallCNNWorkload:tiny:64")
SMOOTHING = 0.99
POOL = 16
"""Distinct synthetic batches each variant steps through, in turn."""
BOOTSTRAP = 2000


@dataclass(frozen=True)
class Case:
    name: str
    workload: str
    size: str
    batch: int


@dataclass(frozen=True)
class Variant:
    name: str
    micro_batches: int
    """0: no meter."""
    every: int


def parse_case(text: str) -> Case:
    """`NAME=WORKLOAD:SIZE:BATCH`, the workload a name or `module:Class`."""
    name, sep, spec = text.partition("=")
    parts = spec.rsplit(":", 2)
    if not sep or len(parts) != 3 or not parts[2].isdigit():
        raise SystemExit(f"bench_noise_scale_cost: --case {text!r}: give NAME=WORKLOAD:SIZE:BATCH, e.g. "
                         "mahjong-tiny=mahjong:tiny:32")
    return Case(name, parts[0], parts[1], int(parts[2]))


def parse_variant(text: str) -> Variant:
    """`plain`, `micro-batches/K` or `previous-step`."""
    if text == "plain":
        return Variant(text, 0, 1)
    if text == "previous-step":
        return Variant(text, 1, 1)
    method, _, every = text.partition("/")
    if method != "micro-batches" or not every.isdigit() or int(every) < 1:
        raise SystemExit(f"bench_noise_scale_cost: --variants: {text!r} is not plain, micro-batches/K or previous-step")
    return Variant(text, 2, int(every))


class Stepper:
    """One variant's trainable, stepped as the trainer's loop steps it."""

    def __init__(self, case: Case, variant: Variant, target: Target, batches: list[Batch], log_every: int) -> None:
        workload = get_workload(case.workload)
        self.trainable: Trainable = target.build(workload, case.size, 0)
        self.target, self.batches, self.log_every = target, batches, log_every
        self.accumulation = GradientAccumulation(self.trainable)
        self.meter: NoiseScaleMeter | None = None
        if variant.micro_batches:
            self.meter = NoiseScaleMeter(self.trainable, world_size=1, samples_per_rank=case.batch,
                                         micro_batches=variant.micro_batches, smoothing=SMOOTHING,
                                         every=variant.every)
            self.meter.attach("single", {})
            self.meter.accumulate_with(self.accumulation)
        self.step_number = 0
        self.samples = 0
        self.rows = 0

    def steps(self, count: int) -> None:
        step = lambda part: self.target.run_step(self.trainable, part)  # noqa: E731
        for _ in range(count):
            batch = self.batches[self.step_number % len(self.batches)]
            size = next(iter(batch.values())).shape[0]
            parts, partition = (1, None) if self.meter is None else self.meter.split(self.step_number, size)
            loss = self.accumulation.run(step, batch, parts, partition)
            self.step_number += 1
            self.samples += size
            if self.step_number % self.log_every == 0:
                float(loss)  # the loop reads the window's losses at its close
                if self.meter is not None:
                    self.rows += len(self.meter.read_window(self.step_number, self.samples, lambda values: values))

    def measured_fraction(self) -> float:
        if self.meter is None:
            return 0.0
        return max((norms.measured_steps for norms in self.meter.networks.values()), default=0) / self.step_number


def timed_block(steppers: dict[str, Stepper], names: list[str], steps: int, turn: int,
                rotation: int) -> dict[str, float]:
    """Each variant's seconds over `steps` steps, the variants taking turns of `turn` steps."""
    seconds = {name: 0.0 for name in names}
    for index in range(steps // turn):
        shift = (rotation + index) % len(names)
        for name in names[shift:] + names[:shift]:
            stepper = steppers[name]
            stepper.target.sync()
            started = time.perf_counter()
            stepper.steps(turn)
            stepper.target.sync()
            seconds[name] += time.perf_counter() - started
    return seconds


def bootstrap_interval(ratios: list[float], rng: random.Random) -> tuple[float, float]:
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP))
    return medians[int(0.025 * BOOTSTRAP)], medians[int(0.975 * BOOTSTRAP) - 1]


def measure_case(case: Case, variants: list[Variant], args: argparse.Namespace, emit: Callable[[dict[str, Any]], None]
                 ) -> list[dict[str, Any]]:
    target = get_target(args.target)
    workload = get_workload(case.workload)
    generator = torch.Generator().manual_seed(0)
    batches = [target.move_batch(workload.synthetic_batch(case.size, case.batch, generator)) for _ in range(POOL)]
    steppers = {variant.name: Stepper(case, variant, target, batches, args.log_every) for variant in variants}
    for stepper in steppers.values():  # warm-up: the first steps, each variant's caches and its measured shapes
        stepper.steps(args.block)
    seconds: dict[str, list[float]] = {variant.name: [] for variant in variants}
    names = [variant.name for variant in variants]
    for repeat in range(args.repeats):
        load_before = os.getloadavg()[0]
        times = timed_block(steppers, names, args.block, args.turn, repeat)
        load_after = os.getloadavg()[0]
        for variant in variants:
            seconds[variant.name].append(times[variant.name])
            emit({"row": "block", "case": case.name, **asdict(case), "variant": variant.name, "repeat": repeat,
                  "steps": args.block, "turn": args.turn,
                  "seconds": times[variant.name], "step_ms": 1000 * times[variant.name] / args.block,
                  "over_plain": times[variant.name] / times["plain"], "load_before": load_before,
                  "load_after": load_after})
        print(f"{case.name} repeat {repeat}: " + ", ".join(
            f"{name} {1000 * times[name] / args.block:.2f} ms" for name in seconds) + f" (load {load_before:.1f})",
            flush=True)
    rng = random.Random(0)
    summary = []
    for variant in variants:
        ratios = [mine / plain for mine, plain in zip(seconds[variant.name], seconds["plain"])]
        low, high = bootstrap_interval(ratios, rng)
        stepper = steppers[variant.name]
        summary.append({"row": "variant", "case": case.name, **asdict(case), "variant": variant.name,
                        "micro_batches": variant.micro_batches, "every": variant.every, "repeats": args.repeats,
                        "steps_per_block": args.block, "step_ms_median": 1000 * statistics.median(seconds[variant.name])
                        / args.block, "over_plain_median": statistics.median(ratios), "over_plain_low": low,
                        "over_plain_high": high, "measured_fraction": stepper.measured_fraction(),
                        "noise_scale_rows": stepper.rows})
    return summary


def markdown(summary: list[dict[str, Any]]) -> str:
    lines = ["| workload | batch | variant | measured steps | step ms (median) | / plain (median) | 95% interval |",
             "|---|---:|---|---:|---:|---:|---|"]
    for row in summary:
        lines.append(f"| {row['case']} | {row['batch']} | `{row['variant']}` | {row['measured_fraction']:.1%} | "
                     f"{row['step_ms_median']:.2f} | {row['over_plain_median']:.3f} | "
                     f"[{row['over_plain_low']:.3f}, {row['over_plain_high']:.3f}] |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=None, help="NAME=WORKLOAD:SIZE:BATCH (repeatable)")
    parser.add_argument("--variants", default=f"plain,micro-batches/{DEFAULT_MEASURE_EVERY},micro-batches/1,previous-step")
    parser.add_argument("--target", default="cpu:eager:fp32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--block", type=int, default=2 * DEFAULT_MEASURE_EVERY, help="steps per timed block")
    parser.add_argument("--turn", type=int, default=16, help="steps a variant runs before the next takes its turn")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cases = [parse_case(text) for text in (args.case or DEFAULT_CASES)]
    variants = [parse_variant(text.strip()) for text in args.variants.split(",") if text.strip()]
    if not variants or variants[0].name != "plain":
        raise SystemExit("bench_noise_scale_cost: --variants must start with plain, the step every ratio is over")
    if args.turn < 1 or args.block % args.turn:
        raise SystemExit(f"bench_noise_scale_cost: --turn {args.turn} must divide --block {args.block}")
    for variant in variants:
        if args.block % variant.every:
            raise SystemExit(f"bench_noise_scale_cost: --block {args.block} is not a multiple of {variant.name}'s "
                             f"{variant.every}: each block would hold a different share of measured steps")
    torch.set_num_threads(args.threads)
    machine = Machine.at_start()
    command = shlex.join(["python", *[arg.replace(str(Path.cwd()) + os.sep, "") for arg in sys.argv]])
    lines: list[str] = []

    def emit(values: dict[str, Any]) -> None:
        values = {**values, "threads": torch.get_num_threads(), "cores": os.cpu_count()}
        lines.append(row_line(MeasurementRow.of(BENCHMARK, values, command, machine.at_end())))
        atomic_write_text(args.out, "".join(line + "\n" for line in lines))

    summary = []
    for case in cases:
        for row in measure_case(case, variants, args, emit):
            emit(row)
            summary.append(row)
    print(markdown(summary))


if __name__ == "__main__":
    main()
