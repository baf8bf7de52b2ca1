"""Time to a goal of `train --batch-schedule auto` beside fixed batches, measured side by side.

    PYTHONPATH=examples python benchmarks/auto_vs_fixed.py --workload mahjong --size tiny --data DATA \\
        --until 'val/accuracy>=0.85' --eval-every-samples 4096 --val-samples 2048 --warmup-samples 4096 \\
        --max-samples 393216 --seeds 0,1,2 --reference best-fixed \\
        --config 'auto=--batch-schedule auto --global-batch-min 32 --global-batch-max 2048 --lr 0.0012' \\
        --config 'best-fixed=--batch-size-per-device 32 --lr 0.0003 --lr-scaling none' \\
        --out docs/results/auto_vs_fixed_mahjong.jsonl

Every configuration is one `trainspeed train` command to the goal (`--until ... --stop-at-target`)
with the same recipe: the goal, a validation every `--eval-every-samples` over `--val-samples`
samples, a linear warm-up over `--warmup-samples` then a constant learning rate (`--min-lr-ratio
1`, as `study time-to-target` trains), and one torch thread. On one rank a schedule measures the
noise scale from 2 micro-batches (auto needs them) at the meter's default, one step in 32 (`--noise-scale-every`);
a fixed batch runs as a user runs it, with the meter's defaults (the previous step's gradient, a
copy and three dot products a step): the ratios are against what a user of a fixed batch runs.
Each configuration adds its own flags (`--config NAME=FLAGS`): the batch (fixed, or the schedule),
the ranks and the learning rate. A configuration with `--adaptdl` runs
`benchmarks/adaptdl_side_by_side.py` instead (AdaptDL's adaptive batch), with the same recipe.

The runs are interleaved seed by seed, the order of the configurations rotated at each seed, so
the machine's load hits every configuration alike. Each run records the whole command's seconds
(start-up to exit, timed here), the run's own `train_s` and `wall_s` to the validation that met the
goal (its `time-to-target` row), its start-up, the steps and samples to that validation, the batch
it ended at with every switch, and the machine's load average before and after. After every run
the rows are written again (atomically): one `measurement` row per run, one per configuration (mean
and range over its seeds, and its ratio to `--reference`'s mean), and the same as CSV and a figure
beside `--out` (`.csv`, `.png`). `python benchmarks/auto_vs_fixed.py --replot ROWS.jsonl` draws
that figure again from committed rows.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.atomic import atomic_write_bytes, atomic_write_text  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import Source, parse_row, row_line  # noqa: E402
from trainspeed.stats import t_quantile  # noqa: E402
from trainspeed.user_json import loads, parse_json  # noqa: E402

BENCHMARK = "auto-vs-fixed"
"""The `benchmark` of this script's `measurement` rows."""


@dataclass(frozen=True)
class Recipe:
    """What every configuration's run shares."""

    workload: str
    size: str
    data: str
    until: str
    eval_every_samples: int
    val_samples: int
    warmup_samples: int
    max_samples: int
    threads: int
    num_workers: int
    log_every: int


@dataclass(frozen=True)
class Configuration:
    name: str
    flags: tuple[str, ...]


def parse_configuration(text: str) -> Configuration:
    """`NAME=FLAGS` of `--config`."""
    name, sep, flags = text.partition("=")
    if not sep or not name.strip() or not flags.strip():
        raise SystemExit(f"auto_vs_fixed: --config {text!r}: give NAME=FLAGS, e.g. 'b32=--batch-size-per-device 32'")
    return Configuration(name.strip(), tuple(shlex.split(flags)))


def flag_value(flags: Sequence[str], name: str) -> str | None:
    """The value of `name` in `flags` (`--name V` or `--name=V`), the last one given, else None."""
    value = None
    for index, flag in enumerate(flags):
        if flag == name and index + 1 < len(flags):
            value = flags[index + 1]
        elif flag.startswith(name + "="):
            value = flag[len(name) + 1:]
    return value


def first_batches(flags: Sequence[str]) -> tuple[int, int]:
    """(global batch, per-device batch) a configuration's run starts at: its fixed per-device batch
    times the ranks, `--global-batch-min` of auto, or an explicit schedule's first entry."""
    if "--adaptdl" in flags:
        start = int(flag_value(flags, "--batch") or 32)
        return start, start
    ranks = int(flag_value(flags, "--nproc") or 1) * int(flag_value(flags, "--nnodes") or 1)
    schedule = flag_value(flags, "--batch-schedule")
    if schedule is None:
        per_device = int(flag_value(flags, "--batch-size-per-device") or 1024)
        return per_device * ranks, per_device
    if schedule == "auto":
        start = flag_value(flags, "--global-batch-min")
        if start is None:
            raise SystemExit("auto_vs_fixed: an auto configuration needs --global-batch-min")
        global_batch = int(start)
    else:
        global_batch = int(schedule.split(",")[0].split("@")[0])
    if global_batch % ranks:
        raise SystemExit(f"auto_vs_fixed: global batch {global_batch} is not a multiple of the {ranks} ranks")
    return global_batch, global_batch // ranks


def train_command(recipe: Recipe, configuration: Configuration, seed: int, out: Path) -> list[str]:
    """The whole `trainspeed train` command of one configuration and seed: the shared recipe, then
    the configuration's flags. A fixed batch runs `--steps` to `--max-samples`, a schedule
    `--samples`; the warm-up and the validation batches are counted from the first batch, so
    every run warms up over the same samples and validates on the same samples."""
    flags = configuration.flags
    if "--adaptdl" in flags:
        return [sys.executable, str(Path(__file__).with_name("adaptdl_side_by_side.py")), "--workload", recipe.workload,
                "--size", recipe.size, "--data", recipe.data, "--until", recipe.until,
                "--eval-every-samples", str(recipe.eval_every_samples), "--val-samples", str(recipe.val_samples),
                "--warmup-samples", str(recipe.warmup_samples), "--max-samples", str(recipe.max_samples),
                "--threads", str(recipe.threads), "--seed", str(seed), *flags, "--out", str(out)]
    global_batch, per_device = first_batches(flags)
    ranks = global_batch // per_device
    length = (["--samples", str(recipe.max_samples)] if flag_value(flags, "--batch-schedule") is not None
              else ["--steps", str(max(1, recipe.max_samples // global_batch))])
    schedule = flag_value(flags, "--batch-schedule") is not None
    meter = (["--noise-scale-micro-batches", "2"]
             if schedule and ranks == 1 and flag_value(flags, "--noise-scale-micro-batches") is None else [])
    return [sys.executable, "-m", "trainspeed", "train", "--workload", recipe.workload, "--size", recipe.size,
            "--data", recipe.data, "--until", recipe.until, "--stop-at-target",
            "--eval-every-samples", str(recipe.eval_every_samples),
            "--eval-batches", str(max(1, recipe.val_samples // per_device)),
            "--warmup-steps", str(max(1, recipe.warmup_samples // global_batch)), "--min-lr-ratio", "1",
            "--threads", str(recipe.threads), "--num-workers", str(recipe.num_workers),
            "--log-every", str(recipe.log_every), "--checkpoint-every", "0", "--seed", str(seed), "--no-progress",
            *length, *meter, *flags, "--out", str(out)]


@dataclass
class RunResult:
    config: str
    seed: int
    order: int
    """The run's place among its seed's runs (0: first)."""
    ranks: int
    reached: bool
    command_s: float
    """The whole command, start-up to exit, timed by this script."""
    train_s: float | None
    wall_s: float | None
    """The run's own clocks to the validation that met the goal (`time-to-target` row)."""
    startup_s: float | None
    steps: int | None
    samples: int | None
    """Steps and samples to the validation that met the goal."""
    value: float | None
    start_global_batch: int
    final_global_batch: int | None
    switches: list[str] = field(default_factory=list)
    """Every switch: `TO@SAMPLES`."""
    lr_peak: float | None = None
    """The peak learning rate at the first batch (the summary's; a schedule scales it at each switch)."""
    load_before: float | None = None
    load_after: float | None = None
    flags: str = ""
    error: str | None = None
    """Where the command failed: the end of its output."""


def one_run(recipe: Recipe, configuration: Configuration, seed: int, order: int, scratch: Path) -> RunResult:
    out = scratch / f"{configuration.name}-s{seed}"
    command = train_command(recipe, configuration, seed, out)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    command_s = time.perf_counter() - started
    load_after = os.getloadavg()[0]
    global_batch, _ = first_batches(configuration.flags)
    if result.returncode != 0 or not (out / "summary.json").is_file():
        # A failed run is a row too (not reached, with its error), so the series goes on.
        error = (result.stderr.strip() or result.stdout.strip())[-600:]
        print(f"auto_vs_fixed: {shlex.join(command)} failed ({result.returncode}): {error}", file=sys.stderr)
        return RunResult(config=configuration.name, seed=seed, order=order, ranks=0, reached=False, command_s=command_s,
                         train_s=None, wall_s=None, startup_s=None, steps=None, samples=None, value=None,
                         start_global_batch=global_batch, final_global_batch=None, load_before=load_before,
                         load_after=load_after, flags=shlex.join(configuration.flags), error=error)
    summary = loads((out / "summary.json").read_text(encoding="utf-8"))
    goal = summary.get("time_to_target") or {}
    schedule = summary.get("batch_schedule") or {}
    rates = summary.get("learning_rates") or {}
    reached = bool(goal.get("reached"))
    return RunResult(
        config=configuration.name, seed=seed, order=order, ranks=int(summary.get("world_size") or 1), reached=reached,
        command_s=command_s, train_s=goal.get("train_s") if reached else None,
        wall_s=goal.get("wall_s") if reached else None, startup_s=summary.get("startup_s"),
        steps=goal.get("step") if reached else None, samples=goal.get("samples") if reached else None,
        value=goal.get("value") if reached else goal.get("best_value"),
        start_global_batch=schedule.get("start_global_batch", global_batch),
        final_global_batch=schedule.get("final_global_batch", summary.get("global_batch")),
        switches=[f"{entry['to_global_batch']}@{entry['samples']}" for entry in schedule.get("switches", [])],
        lr_peak=max((rates.get("peak") or {}).values(), default=None),
        load_before=load_before, load_after=load_after, flags=shlex.join(configuration.flags))


def repo_relative(arg: str) -> str:
    """An argument as the rows record it: a path inside this repository relative to its root, so
    committed rows name no folder of the machine they ran on."""
    root = str(Path(__file__).resolve().parents[1]) + os.sep
    return arg.replace(root, "")


def mean_range(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    return statistics.fmean(values), min(values), max(values)


def summarize(results: Sequence[RunResult], configurations: Sequence[Configuration], reference: str | None) -> list[dict[str, Any]]:
    """One row per configuration: mean, min and max over its seeds of each time, the steps and the
    samples, and the ratio of its mean command seconds to the reference configuration's (also of
    train_s), each over the seeds every compared configuration reached the goal on."""
    rows = []
    by_config = {c.name: [r for r in results if r.config == c.name] for c in configurations}
    ref = by_config.get(reference or "", [])
    for configuration in configurations:
        own = by_config[configuration.name]
        if not own:
            continue
        reached = [r for r in own if r.reached]
        row: dict[str, Any] = {"config": configuration.name, "flags": shlex.join(configuration.flags), "seeds": len(own),
                               "reached": len(reached)}
        for name in ("command_s", "train_s", "wall_s", "startup_s", "steps", "samples"):
            mean, low, high = mean_range([getattr(r, name) for r in reached if getattr(r, name) is not None])
            row.update({f"{name}_mean": mean, f"{name}_min": low, f"{name}_max": high})
        row["final_global_batches"] = [r.final_global_batch for r in own]
        if ref and reference != configuration.name:
            seeds = {r.seed for r in reached} & {r.seed for r in ref if r.reached}
            for name in ("command_s", "train_s", "wall_s"):
                mine = [getattr(r, name) for r in reached if r.seed in seeds]
                theirs = [getattr(r, name) for r in ref if r.seed in seeds and r.reached]
                mine, theirs = [v for v in mine if v is not None], [v for v in theirs if v is not None]
                row[f"{name}_ratio_to_{reference}"] = (statistics.fmean(mine) / statistics.fmean(theirs)
                                                       if mine and theirs else None)
            row["ratio_seeds"] = sorted(seeds)
            for name in ("command_s", "train_s"):
                paired = paired_ratio([(getattr(r, name), getattr(t, name)) for r in reached for t in ref
                                       if t.reached and r.seed == t.seed])
                row.update({f"{name}_paired_ratio_to_{reference}": paired[0],
                            f"{name}_paired_ratio_low": paired[1], f"{name}_paired_ratio_high": paired[2]})
        rows.append(row)
    return rows


def paired_ratio(pairs: Sequence[tuple[float | None, float | None]]) -> tuple[float | None, float | None, float | None]:
    """The geometric mean of seed-by-seed ratios (mine / reference, the same seed run side by side)
    and its 95% t interval, from the log ratios: a change of the machine's load between seeds hits
    both runs of a seed, so the pairs' ratios vary less than either's seconds. (None, None, None)
    for no pair; the interval None for one."""
    logs = [math.log(mine / theirs) for mine, theirs in pairs if mine and theirs]
    if not logs:
        return None, None, None
    centre = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(centre), None, None
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def write_outputs(out: Path, results: Sequence[RunResult], configurations: Sequence[Configuration],
                  reference: str | None, command: str, machine: Machine, recipe: Recipe) -> list[dict[str, Any]]:
    ended = machine.at_end()
    summary = summarize(results, configurations, reference)
    lines = [row_line(MeasurementRow.of(BENCHMARK, {"row": "run", **asdict(recipe), **asdict(r)}, command, ended)) for r in results]
    lines += [row_line(MeasurementRow.of(BENCHMARK, {"row": "config", "reference": reference, **row}, command, ended))
              for row in summary]
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    buffer = io.StringIO()
    names = list(asdict(results[0])) if results else []
    writer = csv.DictWriter(buffer, fieldnames=names)
    writer.writeheader()
    for r in results:
        writer.writerow({k: (" ".join(v) if isinstance(v, list) else v) for k, v in asdict(r).items()})
    atomic_write_text(out.with_suffix(".csv"), buffer.getvalue())
    plot(out.with_suffix(".png"), results, configurations, reference, recipe, ended)
    return summary


def machine_footer(results: Sequence[RunResult], machine: Machine) -> str:
    """The machine the runs took turns on, and the load average before and after each, in one line."""
    loads = [load for r in results for load in (r.load_before, r.load_after) if load is not None]
    load = f"load average {min(loads):.1f} to {max(loads):.1f} around the runs" if loads else "load not recorded"
    return (f"{len(results)} runs, one after another, on {machine.cpu_model or 'an unrecorded CPU'}, "
            f"{machine.cores_usable} of {machine.cores_total} cores usable, {load}; torch {machine.torch_version}")


def plot(path: Path, results: Sequence[RunResult], configurations: Sequence[Configuration], reference: str | None,
         recipe: Recipe, machine: Machine) -> None:
    """Left: each seed's command seconds to the goal per configuration, with the mean, and how many
    seeds missed it. Right: the global batch against samples of every run with a schedule, one that
    never switched too. Below: the machine and its load over the runs."""
    import logging

    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    figure, (times, batches) = plt.subplots(1, 2, figsize=(11, 4.6))
    names = [c.name for c in configurations if any(r.config == c.name for r in results)]
    scheduled = {c.name for c in configurations if "--batch-schedule" in c.flags}
    for x, name in enumerate(names):
        own = [r for r in results if r.config == name and r.reached]
        times.scatter([x] * len(own), [r.command_s for r in own], color="tab:blue", s=18, zorder=3)
        if own:
            mean = statistics.fmean(r.command_s for r in own)
            times.hlines(mean, x - 0.3, x + 0.3, color="tab:red" if name == reference else "black")
            times.annotate(f"{mean:.1f} s", (x + 0.32, mean), fontsize=8, va="center")
        missed = sum(1 for r in results if r.config == name and not r.reached)
        if missed:
            seeds = sum(1 for r in results if r.config == name)
            times.annotate(f"missed the goal\n({missed} of {seeds} seeds)", (x, 0), xytext=(0, 12),
                           textcoords="offset points", ha="center", fontsize=8, color="tab:red")
    times.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
    times.set_xlim(-0.5, len(names) - 0.5)
    times.set_ylabel("whole command to the goal (s)")
    times.set_ylim(bottom=0)
    ranks = "/".join(str(count) for count in sorted({r.ranks for r in results}))
    times.set_title(f"{recipe.workload} {recipe.size}: {recipe.until}, {ranks} rank{'s' if ranks != '1' else ''}",
                    fontsize=9)
    for r in results:
        if r.switches or r.start_global_batch != r.final_global_batch or r.config in scheduled:
            xs, ys = [0], [r.start_global_batch]
            for entry in r.switches:
                to, at = entry.split("@")
                xs += [int(at), int(at)]
                ys += [ys[-1], int(to)]
            end = r.samples if r.samples is not None else recipe.max_samples
            xs.append(max(end, xs[-1]))
            ys.append(ys[-1])
            batches.plot(xs, ys, label=f"{r.config} s{r.seed}", lw=1)
    batches.set_xlabel("samples trained")
    batches.set_ylabel("global batch")
    batches.set_yscale("log", base=2)
    batches.set_title("batch schedules (to the validation that met the goal)", fontsize=9)
    if batches.lines:
        batches.legend(fontsize=7)
    figure.text(0.01, 0.01, machine_footer(results, machine), fontsize=6, va="bottom")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


def replot(rows_path: Path) -> None:
    """The figure again from committed rows (`--replot ROWS.jsonl`), beside them: nothing runs."""
    results, configurations, reference, recipe, machine = [], [], None, None, None
    for number, line in enumerate(rows_path.read_text(encoding="utf-8").splitlines(), start=1):
        record = parse_json(line, f"{rows_path}: line {number}")
        row, _ = parse_row(MeasurementRow, record, Source(str(rows_path), number))
        values, machine = dict(row.values), row.machine or machine
        if values.pop("row") == "run":
            recipe = Recipe(**{name: values.pop(name) for name in Recipe.__dataclass_fields__})
            results.append(RunResult(**values))
        else:
            configurations.append(Configuration(values["config"], tuple(shlex.split(values["flags"]))))
            reference = values["reference"]
    if recipe is None or machine is None:
        raise SystemExit(f"auto_vs_fixed: {rows_path} holds no run rows with their machine")
    plot(rows_path.with_suffix(".png"), results, configurations, reference, recipe, machine)


def main() -> None:
    if sys.argv[1:2] == ["--replot"] and len(sys.argv) == 3:
        replot(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mahjong")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--data", required=True)
    parser.add_argument("--until", required=True)
    parser.add_argument("--eval-every-samples", type=int, required=True)
    parser.add_argument("--val-samples", type=int, required=True)
    parser.add_argument("--warmup-samples", type=int, required=True)
    parser.add_argument("--max-samples", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=16)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--config", action="append", required=True, type=parse_configuration)
    parser.add_argument("--reference", default=None, help="the configuration the ratios are to")
    parser.add_argument("--keep-runs", type=Path, default=None,
                        help="copy each run's summary.json and metrics.jsonl to DIR/NAME-sSEED")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    recipe = Recipe(args.workload, args.size, args.data, args.until, args.eval_every_samples, args.val_samples,
                    args.warmup_samples, args.max_samples, args.threads, args.num_workers, args.log_every)
    configurations: list[Configuration] = args.config
    if args.reference is not None and args.reference not in {c.name for c in configurations}:
        raise SystemExit(f"auto_vs_fixed: --reference {args.reference} is none of the --config names")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    machine = Machine.at_start()
    command = shlex.join(["python", *(repo_relative(arg) for arg in sys.argv)])
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="auto_vs_fixed-") as scratch:
        for index, seed in enumerate(seeds):
            shift = index % len(configurations)
            for order, configuration in enumerate(configurations[shift:] + configurations[:shift]):
                result = one_run(recipe, configuration, seed, order, Path(scratch))
                results.append(result)
                if args.keep_runs is not None:
                    kept = args.keep_runs / f"{configuration.name}-s{seed}"
                    kept.mkdir(parents=True, exist_ok=True)
                    for name in ("summary.json", "metrics.jsonl"):
                        source = Path(scratch) / f"{configuration.name}-s{seed}" / name
                        if source.is_file():
                            atomic_write_bytes(kept / name, source.read_bytes())
                print(f"{configuration.name} seed {seed}: {'reached' if result.reached else 'MISSED'} in "
                      f"{result.command_s:.1f} s (train {result.train_s}, steps {result.steps}, samples {result.samples}, "
                      f"batch {result.start_global_batch}->{result.final_global_batch} {' '.join(result.switches)}; "
                      f"load {result.load_before:.2f}->{result.load_after:.2f})", flush=True)
                write_outputs(args.out, results, configurations, args.reference, command, machine, recipe)
    for row in summarize(results, configurations, args.reference):
        ratio = row.get(f"command_s_ratio_to_{args.reference}")
        if not row["reached"]:
            print(f"{row['config']}: 0/{row['seeds']} reached")
            continue
        paired = row.get(f"command_s_paired_ratio_to_{args.reference}")
        low, high = row.get("command_s_paired_ratio_low"), row.get("command_s_paired_ratio_high")
        print(f"{row['config']}: {row['reached']}/{row['seeds']} reached, command {row['command_s_mean']:.1f} s "
              f"[{row['command_s_min']:.1f}, {row['command_s_max']:.1f}]"
              + (f", {ratio:.2f}x {args.reference}" if ratio is not None else "")
              + (f", paired {paired:.2f}x" if paired is not None else "")
              + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""))


if __name__ == "__main__":
    main()
