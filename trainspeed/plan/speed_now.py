"""`plan --check ... --check-rebench`: the machine's speed when a check runs.

A plan's step time and compilations are what its bench rows measured, on the machine and under the
load they ran at. A check runs later: beside other jobs, on another host of a pool, on another CPU.
A check slower than its prediction then says nothing of the model by itself, for the machine may be
the slower one. With `--check-rebench`, the bench row a configuration's step time came from is
measured again just before the configuration's first check run, with that row's own settings
(target, batch, feed, noise meter, threads, warm-up; at least 5 windows of 1 s), in a process of
its own as the run's is.

The check row then holds, beside the prediction, the prediction at the speed now:
- its steps and validations at the step time now (the planned row's samples/s over the re-bench's);
- its compilations at the compile now (the re-bench's first step beyond its steady one, over the
  plan's first graph's: both are a new process's first graph, the compiler's start-up in it);
- its start-up as planned (a process's start is imports and reading, which the re-bench does not time).

A miss that the speed now explains is the machine's; one it does not is the model's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.flags import bench_command
from trainspeed.bench.results import ResultRow, read_rows
from trainspeed.errors import UsageError
from trainspeed.plan.compiles import bench_compile_s
from trainspeed.plan.inputs import PlanInputs
from trainspeed.plan.rows import PlanRow
from trainspeed.report.inputs import Read
from trainspeed.report.page import slug
from trainspeed.subcommands import CommandFailed, run_trainspeed


@dataclass(frozen=True)
class Rebench:
    """A configuration's bench row as the plan read it (`planned`) and measured again now (`now`)."""

    planned: ResultRow
    now: ResultRow
    source: str
    """Where the row measured now is (file:line)."""

    @property
    def step_ratio(self) -> float:
        """A step's seconds now over the plan's: above 1, the machine runs slower than it did."""
        return self.planned.samples_per_s / self.now.samples_per_s  # type: ignore[operator]

    @property
    def compile_now_s(self) -> float | None:
        """The re-bench's first step beyond its steady one (None on an eager target)."""
        return bench_compile_s(self.now) if self.now.compiles_before is not None else None

    def predicted_s(self, row: PlanRow) -> float:
        return predicted_at(row, self.step_ratio, self.compile_now_s)

    def interval(self, row: PlanRow) -> list[float] | None:
        return interval_at(row, self.step_ratio, self.compile_now_s)

    def line(self, row: PlanRow) -> str:
        compiled = ""
        first = first_compile_s(row)
        if self.compile_now_s is not None and first:
            compiled = f", first compilation {self.compile_now_s:,.1f} s against {first:,.1f} planned"
        return (f"rebench {row.config}: {self.now.target} at {self.now.batch_size}/device now "
                f"{self.now.samples_per_s:,.1f} samples/s against {self.planned.samples_per_s:,.1f} planned (a step "
                f"{self.step_ratio:.2f}x as long){compiled}; at the speed now predicted {self.predicted_s(row):,.1f} s "
                f"({self.source})")


def first_compile_s(row: PlanRow) -> float | None:
    """The plan's compilation of a run's first graph (None where nothing compiles or none was measured)."""
    return next((item.seconds for item in row.compilations or [] if item.seconds), None)


def predicted_at(row: PlanRow, step_ratio: float, compile_now_s: float | None, seconds: float | None = None) -> float:
    """The row's prediction (or `seconds`, an end of its interval) at another speed: its start-up
    as planned, its compilations at `compile_now_s` over its first graph's (as planned where either
    is not measured), the rest (steps and validations) at `step_ratio` times the step."""
    compile_s = row.compile_s or 0.0
    start_s = row.overhead_s or 0.0
    rest_s = max(0.0, (row.predicted_s if seconds is None else seconds) - start_s - compile_s)  # type: ignore[operator]
    first = first_compile_s(row)
    compile_ratio = compile_now_s / first if first and compile_now_s is not None else 1.0
    return start_s + compile_s * compile_ratio + rest_s * step_ratio


def interval_at(row: PlanRow, step_ratio: float, compile_now_s: float | None) -> list[float] | None:
    """The row's 95% interval at another speed: each end moved as `predicted_at` moves the point
    (the start-up's share of the spread moves with the steps': a stated approximation)."""
    if row.predicted_s_ci95 is None:
        return None
    return [predicted_at(row, step_ratio, compile_now_s, end) for end in row.predicted_s_ci95]


def planned_bench(inputs: PlanInputs, row: PlanRow) -> Read[ResultRow] | None:
    """The bench row the plan row's step time came from (the first of its sources)."""
    source = row.sources[0] if row.sources else None
    return next((read for read in inputs.bench if str(read.source) == source), None)


def why_not_rebenched(row: PlanRow, bench: Read[ResultRow] | None) -> str | None:
    """Why a configuration's speed now cannot be measured here; None where it can."""
    if row.schedule != "fixed":
        return "a growing batch steps at several batches, each its own bench row"
    if bench is None:
        return "its bench row is not among the plan's inputs"
    if bench.row.transport is not None:
        return f"its bench row timed a device elsewhere ({bench.row.target} over {bench.row.transport})"
    if not bench.row.samples_per_s:
        return "its bench row holds no samples/s"
    return None


REBENCH_WINDOWS = 5
REBENCH_MIN_WINDOW_S = 1.0
"""The bench again takes at least this many windows of at least this long: a shared machine's
speed wavers for a second or two at a time, which a short bench of 3 windows of 0.5 s can catch
whole, and the median of more, longer windows outvotes."""


def rebench_config(planned: ResultRow, workload: str, out: Path) -> BenchConfig:
    """The bench of one row again: its target, batch, feed, noise meter, threads and warm-up, with
    at least `REBENCH_WINDOWS` windows of `REBENCH_MIN_WINDOW_S`."""
    threads = planned.machine.torch_threads if planned.machine is not None else None
    timing = TimingPlan(warmup_steps=planned.warmup_steps if planned.warmup_steps is not None else 3,
                        windows=max(REBENCH_WINDOWS, planned.windows or 0),
                        min_window_s=max(REBENCH_MIN_WINDOW_S, planned.min_window_s or 0.0))
    feed = planned.feed or "device"
    return BenchConfig(workload=workload, size=planned.size, targets=[planned.target],
                       batch_sizes=[planned.batch_size], out=out, plan=timing, feeds=[feed],
                       data=Path(planned.data) if feed == "data" and planned.data else None,
                       num_workers=planned.data_workers if planned.data_workers is not None else 1,
                       noise_scale=["on" if planned.noise_scale else "off"], threads=threads)


def rebench_path(check_dir: Path, row: PlanRow) -> Path:
    """Where a configuration's re-bench writes: beside its check runs, never in one."""
    return check_dir / f"rebench-{slug(row.config)}.jsonl"


def _config_of(row: PlanRow, bench: ResultRow, workload: str, check_dir: Path) -> BenchConfig:
    """The bench of the row's configuration again; its settings refused in one line naming it."""
    try:
        return rebench_config(bench, workload, rebench_path(check_dir, row))
    except UsageError as error:
        raise UsageError(f"plan: --check-rebench {row.config}: its bench row's settings: {error}; check without "
                         "--check-rebench, or plan from bench rows this machine can repeat") from None


def check_rebenchable(inputs: PlanInputs, rows: Sequence[PlanRow], workload: str, check_dir: Path) -> None:
    """Every configuration's bench again built before anything runs, so a setting this machine
    refuses (more threads than its CPUs) is one line before any check, not after the first."""
    for row in rows:
        bench = planned_bench(inputs, row)
        if bench is not None and why_not_rebenched(row, bench) is None:
            _config_of(row, bench.row, workload, check_dir)


def rebench(inputs: PlanInputs, row: PlanRow, workload: str, check_dir: Path) -> Rebench | None:
    """The configuration's bench row measured again now; None (and a line) where it cannot be."""
    bench = planned_bench(inputs, row)
    why = why_not_rebenched(row, bench)
    if why is not None:
        print(f"rebench {row.config}: not measured again ({why}); its check holds no speed now", flush=True)
        return None
    assert bench is not None
    config = _config_of(row, bench.row, workload, check_dir)
    try:
        run_trainspeed(*bench_command(config))
    except CommandFailed as error:
        raise UsageError(f"plan: --check-rebench {row.config}: {error}") from None
    measured = [(line, found) for line, found in enumerate(read_rows(config.out), start=1)
                if found.status == "ok" and found.samples_per_s]
    if not measured:
        raise UsageError(f"plan: --check-rebench {row.config}: the bench again measured no samples/s ({config.out})")
    line, now = measured[-1]
    return Rebench(bench.row, now, f"{config.out}:{line}")
