"""What `study critical-batch` costs beside `study time-to-target` of the same workload, in wall time.

    python benchmarks/critical_batch_cost.py --work build/cb_cost --rounds 1 \\
        --run 'time-to-target=study time-to-target --preset full --workload mahjong ...' \\
        --run 'critical-batch=study critical-batch --from cb_base ...' \\
        [--run 'critical-batch-before=study critical-batch --from cb_base ...' --before critical-batch-before=CHECKOUT] \\
        --out docs/results/critical_batch_cost.jsonl

Each `--run LABEL=ARGS` is one trainspeed command (a study; `--out` is added: LABEL-rROUND, removed
first so every study trains all it needs), run from `--work` with this checkout's trainspeed, or,
for a label `--before` names, with another checkout's (the code before a change, measured beside
it). The runs go round after round, the order rotated each round, so the machine's load, which
other jobs share, hits every study alike. Each run records the whole command's seconds (timed here,
start-up to exit), the study's own `total_s`, the machine's 1-minute load average at its start, its
end and its mean (sampled every 10 s), its trainings and the processes they took, and, for a
critical-batch study, each point's critical batch and tolerance (so the rounds and the code before
show the same results). After every run the rows are written again (atomically): one `measurement`
row per run, and beside `--out` a table (`.md`) of each critical-batch study's wall time as a
fraction of the same round's time-to-target study's.

A critical-batch study starts from a base run, which the time-to-target study does not need, so the
table gives each critical-batch study's fractions twice: the study alone, and the study with its
base run's seconds and CPU seconds added. A row records its base run's cost (`base_run_s`,
`base_run_cpu_s`) from the base run's summary; rows written before it did take a stand-in, the
committed base run of the same workload and settings (`--base-run`, by default those of
docs/critical_batch.md sections 5 and 6), which the table names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import row_line  # noqa: E402

BENCHMARK = "critical-batch-cost"
REPO = Path(__file__).resolve().parents[1]
LOAD_EVERY_S = 10.0
STAND_IN_BASE_RUNS = {
    "mahjong tiny": "docs/results/critical_batch_mahjong_base",
    "hf:gpt2 tiny,seq=65": "docs/results/critical_batch_gpt2_base",
    "char_lm_workload:CharLMWorkload tiny": "docs/results/critical_batch_charlm_base",
}
"""Per workload (as the rows name it), the committed base run of docs/critical_batch.md sections 5
and 6, of the batch, learning rate and goal `critical_batch_cost.sh` makes its own at: the stand-in
for rows that do not record their base run's cost. Mahjong's and hf:gpt2's measured the noise scale
on every step, which that script's base runs do not ask for, and Mahjong's trained 768 steps where
the rounds' met the goal at 640: those two stand-ins likely overstate the base run."""


@dataclass(frozen=True)
class StudyCost:
    """One study run: what it cost in wall time, under what load, and what it found."""

    round: int
    label: str
    code: str
    """`this checkout`, or the label's --before checkout as given to --before-name."""
    command: str
    wall_s: float
    total_s: float | None
    """The study's own `total_s` (its settings row): from its plan to its rows."""
    load_start: float
    load_mean: float
    load_end: float
    trainings: int
    """Its trainings: a time-to-target study's runs, a critical-batch study's branches."""
    processes: int | None
    """The processes its trainings ran in (None: not recorded by that code)."""
    parallel_runs: int | None
    critical: list[str] | None
    """Per point, the critical batch as its row says it (a critical-batch study)."""
    tolerance: list[float | None] | None
    train_cpu_s: float | None = None
    """CPU seconds its trainings spent from their first step to their last (each run's `wall_s` x
    `cpu_s_per_wall_s`: neither their start-up nor the validation and checkpoint after the last step)."""
    workload: str | None = None
    """The workload and its size, as the study's settings row names them."""
    cpu_s: float | None = None
    """CPU seconds of the whole command and every process below it (user + system, from the
    resource usage of this script's children): what it cost, whatever else shared the machine."""
    base_run_s: float | None = None
    """A critical-batch study: the seconds of the base run it starts from (`base_run_cost`)."""
    base_run_cpu_s: float | None = None
    """A critical-batch study: the CPU seconds of that base run (`base_run_cost`)."""


class LoadSampler:
    """The 1-minute load average every LOAD_EVERY_S seconds while a command runs."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(LOAD_EVERY_S):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> list[float]:
        self._done.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return self.samples


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def train_cpu_s(runs: Path) -> float:
    """The CPU seconds of every run under `runs` (its summary's wall_s x cpu_s_per_wall_s)."""
    total = 0.0
    for path in sorted(runs.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        total += summary["wall_s"] * (summary.get("cpu_s_per_wall_s") or 0.0)
    return total


def base_run_cost(summary: dict) -> tuple[float, float]:
    """A training run's (seconds, CPU seconds) from its summary: its start-up, its steps and the
    validations and checkpoints between them (`startup_s + wall_s + paused_s`); its CPU seconds are
    its process's CPU per wall second over its steps and pauses times those seconds, plus its
    start-up at one CPU second a second (a summary does not measure the start-up's CPU, nor its
    loader workers', which are processes of their own)."""
    startup = summary.get("startup_s") or 0.0
    stepping = summary["wall_s"] + (summary.get("paused_s") or 0.0)
    return startup + stepping, (summary.get("cpu_s_per_wall_s") or 0.0) * stepping + startup


def findings(out: Path) -> dict:
    """What the study's rows say: its total_s, trainings, processes, settings and critical batches;
    and what its runs' summaries say of the CPU they spent."""
    critical = rows_of(out / "critical_batch.jsonl")
    if critical:
        (settings,) = [row for row in critical if row["kind"] == "critical-batch-study-config"]
        points = [row for row in critical if row["kind"] == "critical-batch"]
        branches = settings["branch_runs"]
        base = out.parent / settings["base_run"] / "summary.json"
        base_s, base_cpu_s = base_run_cost(json.loads(base.read_text())) if base.exists() else (None, None)
        return dict(workload=f"{settings['workload']} {settings['size']}", total_s=settings["total_s"],
                    base_run_s=base_s, base_run_cpu_s=base_cpu_s,
                    trainings=branches, processes=settings.get("branch_processes", branches),
                    parallel_runs=settings["settings"]["parallel_runs"],
                    critical=[row["critical_text"] for row in points], tolerance=[row["tolerance"] for row in points],
                    train_cpu_s=train_cpu_s(Path(settings["settings"]["runs_dir"] or out / "critical_batch_runs")))
    rows = rows_of(out / "time_to_target.jsonl")
    (settings,) = [row for row in rows if row["kind"] == "time-to-target-study-config"]
    runs = [row for row in rows if row["kind"] == "time-to-target-study-run"]
    return dict(workload=f"{settings['workload']} {settings['size']}", total_s=settings.get("total_s"),
                trainings=len(runs), processes=len(runs),
                parallel_runs=settings.get("settings", {}).get("parallel_runs"), critical=None, tolerance=None,
                train_cpu_s=train_cpu_s(out / "time_to_target_runs"))


def children_cpu_s() -> float:
    """User and system CPU seconds of every process below this one that has ended (and been waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_study(round_: int, label: str, args: list[str], work: Path, checkout: Path | None, code: str) -> StudyCost:
    out = f"{label}-r{round_}"
    shutil.rmtree(work / out, ignore_errors=True)
    argv = [*args, "--out", out]
    env = dict(os.environ)
    root = checkout or REPO
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), str(root / "examples"), env.get("PYTHONPATH")]))
    print(f"[round {round_}] {label}: trainspeed {shlex.join(argv)}", flush=True)
    sampler = LoadSampler()
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "trainspeed", *argv], cwd=work, env=env, capture_output=True,
                            text=True)
    wall = time.perf_counter() - started
    cpu = children_cpu_s() - cpu_before
    loads = sampler.stop()
    if result.returncode != 0:
        raise SystemExit(f"{label} failed (exit {result.returncode}): {result.stderr.strip()[-2000:]}")
    found = findings(work / out)
    print(f"[round {round_}] {label}: {wall:.0f} s, load {loads[0]:.1f} .. {loads[-1]:.1f}", flush=True)
    return StudyCost(round=round_, label=label, code=code, command=shlex.join(["trainspeed", *argv]), wall_s=wall,
                     load_start=loads[0], load_mean=sum(loads) / len(loads), load_end=loads[-1], cpu_s=cpu, **found)


def _ratio(value: float | None, reference: float | None) -> str:
    return f"{value / reference:.2f}" if value and reference else "–"


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def with_base_run(cost: StudyCost, stand_ins: dict[str, Path]) -> tuple[StudyCost, str]:
    """A critical-batch study's cost with its base run's, and whose base run it is: the row's own,
    or the stand-in of its workload (a committed base run) where the row records none."""
    if cost.critical is None:
        return cost, "–"
    if cost.base_run_s is not None:
        return cost, "its own"
    folder = stand_ins.get(cost.workload or "")
    if folder is None:
        return cost, "–"
    base_s, base_cpu_s = base_run_cost(json.loads((_at_repo(folder) / "summary.json").read_text()))
    return dataclasses.replace(cost, base_run_s=base_s, base_run_cpu_s=base_cpu_s), f"`{folder}`"


def _at_repo(folder: Path) -> Path:
    return folder if folder.is_absolute() else REPO / folder


def _plus(value: float | None, base: float | None) -> float | None:
    return value + base if value is not None and base is not None else None


def table(costs: list[StudyCost], stand_ins: dict[str, Path] | None = None) -> str:
    """Per round, every study's wall time and CPU seconds, and each critical-batch study's as a
    fraction of the round's time-to-target study's: alone, and with the base run it starts from."""
    stand_ins = {name: Path(folder) for name, folder in STAND_IN_BASE_RUNS.items()} if stand_ins is None else stand_ins
    lines = ["| round | workload | study | code | parallel runs | trainings in processes | wall s | study's total_s | "
             "load average start / mean / end | training CPU s | CPU s | critical batch per point | "
             "wall / time-to-target's | training CPU / time-to-target's | CPU / time-to-target's | "
             "base run | base run s | base run CPU s | with the base run: wall / time-to-target's | "
             "with the base run: CPU / time-to-target's |",
             "|---:|---|---|---|---:|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for cost in costs:
        found = [other for other in costs if other.round == cost.round and other.critical is None]
        reference = found[0] if found and cost.critical is not None else None
        ratios = [_ratio(getattr(cost, name), getattr(reference, name, None))
                  for name in ("wall_s", "train_cpu_s", "cpu_s")]
        based, whose = with_base_run(cost, stand_ins)
        with_base = [_ratio(_plus(based.wall_s, based.base_run_s), getattr(reference, "wall_s", None)),
                     _ratio(_plus(based.cpu_s, based.base_run_cpu_s), getattr(reference, "cpu_s", None))]
        processes = "–" if cost.processes is None else f"{cost.trainings} in {cost.processes}"
        critical = "–" if cost.critical is None else ", ".join(cost.critical)
        lines.append(" | ".join([
            f"| {cost.round}", cost.workload or "–", cost.label, cost.code, str(cost.parallel_runs), processes,
            _number(cost.wall_s), _number(cost.total_s),
            f"{cost.load_start:.1f} / {cost.load_mean:.1f} / {cost.load_end:.1f}", _number(cost.train_cpu_s),
            _number(cost.cpu_s), critical, *ratios, whose, _number(based.base_run_s), _number(based.base_run_cpu_s),
            *with_base]) + " |")
    return "\n".join(lines) + "\n"


def write(lines: list[str], costs: list[StudyCost], out: Path, stand_ins: dict[str, Path] | None = None) -> None:
    """The rows (each line as written after its run) and their table, both atomically."""
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    atomic_write_text(out.with_suffix(".md"), table(costs, stand_ins))


def cost_of(row: dict) -> StudyCost:
    fields = set(StudyCost.__dataclass_fields__)
    return StudyCost(**{name: value for name, value in row["values"].items() if name in fields})


def read_costs(path: Path) -> list[StudyCost]:
    """The study costs of rows this script wrote."""
    return [cost_of(row) for row in rows_of(path)
            if row.get("kind") == "measurement" and row.get("benchmark") == BENCHMARK]


def read_again(line: str, work: Path) -> str:
    """A row of an earlier run of this script, what its study found read again from the study's
    folder where it is still there (the times, loads and command stay as measured)."""
    row = json.loads(line)
    cost = cost_of(row)
    out = work / f"{cost.label}-r{cost.round}"
    if not out.is_dir():
        return line
    return json.dumps({**row, "values": {**row["values"], **findings(out)}})


def labelled(text: str, what: str) -> tuple[str, str]:
    label, sep, value = text.partition("=")
    if not sep or not label or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: give {what} as LABEL=VALUE")
    return label, value


def _shown(arg: str) -> str:
    """An argument as the rows record it: a path inside this checkout relative to it (the rows name
    no folder of the machine that measured them)."""
    path = Path(arg)
    if path.is_absolute() and path.resolve().is_relative_to(REPO):
        return str(path.resolve().relative_to(REPO))
    return arg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", type=Path, default=None,
                        help="make the table (.md) beside ROWS again from those rows, running nothing")
    parser.add_argument("--base-run", action="append", default=[], type=lambda t: labelled(t, "--base-run"),
                        help="WORKLOAD=RUN: the base run whose cost stands in for that of a critical-batch study of "
                             "WORKLOAD (as the rows name it) whose row records none (default: the committed base "
                             "runs of docs/critical_batch.md sections 5 and 6)")
    parser.add_argument("--work", type=Path, help="the folder the studies run in (data, base run)")
    parser.add_argument("--run", action="append", default=[], type=lambda t: labelled(t, "--run"),
                        help="LABEL=ARGS: a trainspeed command, --out left out")
    parser.add_argument("--before", action="append", default=[], type=lambda t: labelled(t, "--before"),
                        help="LABEL=CHECKOUT: run LABEL with that checkout's trainspeed")
    parser.add_argument("--before-name", default="the code before",
                        help="what the rows call a --before checkout's code (its commit, say)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--first-round", type=int, default=1,
                        help="the number of the first round (rounds of an earlier run of this script go before)")
    parser.add_argument("--append", action="store_true", help="keep the rows --out holds, and add these after them")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    stand_ins = {name: Path(folder) for name, folder in STAND_IN_BASE_RUNS.items()}
    stand_ins.update({name: Path(folder) for name, folder in args.base_run})
    if args.table is not None:
        costs = read_costs(args.table)
        atomic_write_text(args.table.with_suffix(".md"), table(costs, stand_ins))
        return 0
    if args.work is None or args.out is None or not (args.run or (args.append and args.rounds == 0)):
        parser.error("give --work, --out and a --run per study (or --table ROWS)")
    before = {label: Path(path).resolve() for label, path in args.before}
    runs = [(label, shlex.split(text)) for label, text in args.run]
    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "benchmarks/critical_batch_cost.py", *map(_shown, given)])
    lines = [read_again(line, args.work) for line in args.out.read_text().splitlines() if line.strip()] \
        if args.append else []
    costs = [cost_of(json.loads(line)) for line in lines]
    for round_ in range(args.first_round, args.first_round + args.rounds):
        shift = (round_ - 1) % len(runs)
        for label, study in runs[shift:] + runs[:shift]:
            checkout = before.get(label)
            code = args.before_name if checkout is not None else "this checkout"
            cost = run_study(round_, label, study, args.work, checkout, code)
            costs.append(cost)
            lines.append(row_line(MeasurementRow.of(BENCHMARK, cost, command, Machine.at_start())))
            write(lines, costs, args.out, stand_ins)
    write(lines, costs, args.out, stand_ins)
    print(table(costs, stand_ins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
