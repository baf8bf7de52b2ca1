"""`trainspeed plan`: which configuration reaches the goal first, predicted from measured rows (and checked)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from trainspeed.bench.config import TARGET_LIST
from trainspeed.cli.bench import add_bench_command
from trainspeed.cli.train import add_train_command
from trainspeed.flags import (
    INT_FLAG_MAX,
    POSITIVE_INTS,
    TIMEOUT,
    WORKLOAD_HELP,
    CommaListAction,
    OneLineParser,
    Range,
    comma_list,
    seed_value,
)

if TYPE_CHECKING:
    from trainspeed.plan.measure import Measurement
    from trainspeed.plan.inputs import PlanInputs
    from trainspeed.plan.plan import PlanGrid
    from trainspeed.plan.rows import PlanRow
    from trainspeed.plan.steps import StepsModel

CHECK_SEEDS = Range(1, 100, why_high=" runs of each configuration")
RUN_LIST = comma_list(Path, what="run folders", example="runs/tpu-b256")
CHECK_LIST = comma_list(what="configurations (target/devices/batch) or keywords", example="best,samples-per-s")
SCHEDULE_LIST = comma_list(choices=("fixed", "auto"), what="fixed (the global batch held) or auto (a batch that doubles "
                           "while the noise scale says it still scales)", example="fixed,auto", distinct=True)

EPILOG = """\
reads bench rows (samples/s per target and per-device batch), run directories of `trainspeed train`
(their efficiency against the bench, by device count) and the rows of `trainspeed study time-to-target`
(steps to the goal against the batch); with no study, one run that met its --until goal and measured its
noise scale gives the steps by McCandlish's model, and the plan says so; a `trainspeed study critical-batch`
folder of that run gives its critical batch in place of the noise scale. --measure first runs the bench rows
and short runs the plan lacks, within --budget-s
examples:
  trainspeed plan bench.jsonl runs/two-ranks study/time_to_target.jsonl --out plan.jsonl
  trainspeed plan ... --out plan.jsonl --check best,samples-per-s,cpu:eager:fp32/2/512 --check-dir checks
  trainspeed plan runs/base --measure --budget-s 300 --measure-dir measured --devices 1,2 --out plan.jsonl
"""


def add_plan_command(subparsers: argparse._SubParsersAction) -> None:
    from trainspeed.plan import CHECK_KEYWORDS

    parser = subparsers.add_parser(
        "plan", help="rank configurations by predicted time to a quality goal (and run some to check)",
        description="Predict, for each target, device count and global batch, the time to the goal: steps to "
        "the goal (from a study's fit) x step time (from bench and run rows), plus start-up and validation.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                        help="bench result files, run directories, a time-to-target study's rows or folder, a "
                        "critical-batch study's folder")
    parser.add_argument("--targets", action=CommaListAction, items=TARGET_LIST, default=None,
                        help="targets to plan for (default: every one the bench rows measured)")
    parser.add_argument("--devices", action=CommaListAction, items=POSITIVE_INTS, default=None,
                        help="device counts, e.g. 1,2,8 (default: 1 and those of the runs given)")
    parser.add_argument("--global-batches", action=CommaListAction, items=POSITIVE_INTS, default=None,
                        help="global batches (default: the study's, else the bench rows')")
    parser.add_argument("--schedules", action=CommaListAction, items=SCHEDULE_LIST, default=None,
                        help="fixed: each global batch held; auto: per target and device count, a batch from the "
                        "smallest global batch doubling up to the largest (default: both where the inputs measured "
                        "the noise scale over a run, else fixed)")
    parser.add_argument("--borrow-steps", action="store_true",
                        help="plan the bench rows' size with the steps measured at another size of the workload (an "
                        "assumption every row states; without it, rows of two sizes are refused)")
    parser.add_argument("--out", type=Path, default=None, help="JSONL file the plan's rows (and checks) are appended to")
    parser.add_argument("--check", action=CommaListAction, items=CHECK_LIST, default=None, metavar="CONFIGS",
                        help="run these configurations to the goal and compare: target/devices/batch, "
                        "target/devices/auto:MIN..MAX (train --batch-schedule auto), or "
                        + ", ".join(f"{name} ({what})" for name, what in CHECK_KEYWORDS.items()))
    parser.add_argument("--checked", action=CommaListAction, items=RUN_LIST, default=None, metavar="RUNS",
                        help="run folders made before (by hand, or with `train --exported` on a machine with JAX "
                        "only) to set beside the plan's rows of their configurations: measured is each run's "
                        "start-up and wall seconds to the goal, as it recorded them (needs --out)")
    parser.add_argument("--check-dir", type=Path, default=None, help="a new or empty folder for the check runs")
    parser.add_argument("--check-exported", type=Path, default=None, metavar="FOLDER",
                        help="the checks train the steps `trainspeed export` wrote to FOLDER (`train --exported`, "
                        "on a host with JAX only), with the recipe they would train with --target")
    parser.add_argument("--check-seed", type=seed_value, default=1000, help="training seed of the check runs "
                        "(default 1000: not one of a study's)")
    parser.add_argument("--check-seeds", type=CHECK_SEEDS.parser(int), default=1,
                        help="runs of each checked configuration, at seeds --check-seed, --check-seed + 1, ...: a "
                        "check row each, and a line of their mean beside the prediction (one run's time scatters "
                        "about the predicted from seed to seed; default 1)")
    parser.add_argument("--check-rebench", action="store_true",
                        help="before each checked configuration's first run, bench the row its step time came from "
                        "again (its settings, a process of its own), and say beside the prediction what it predicts "
                        "at the machine's speed now: a miss the speed now explains is the machine's, not the model's")
    parser.add_argument("--workload", default=None,
                        help="the inputs' workload, which --check trains and --measure runs: needed where it is "
                        "your own module "
                        f"(rows are data and never choose code to run); one of {WORKLOAD_HELP}")
    parser.add_argument("--measure", action="store_true",
                        help="first run the bench rows and short runs of 1 and N devices the plan lacks, within "
                        "--budget-s, into --measure-dir, and plan with them")
    parser.add_argument("--budget-s", type=TIMEOUT.parser(float), default=None,
                        help="seconds --measure may spend (each measurement is estimated first; the ones that do not "
                        "fit are left out, and said)")
    parser.add_argument("--measure-dir", type=Path, default=None,
                        help="a new or empty folder for what --measure runs (bench.jsonl, runs/)")
    parser.add_argument("--tolerance", type=Range(0, 10, low_open=True).parser(float), default=0.25,
                        help="a check within 1 +- this of its prediction is 'within' (default 0.25); an extrapolated "
                        "configuration's steps are bounds, not a prediction: its check is judged by its interval")
    parser.set_defaults(handler=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    planned_rows(args)
    return 0


def planned_rows(args: argparse.Namespace) -> list[Any]:
    """Plan (and check) what the flags describe, print and append what the command does, and
    return the plan's rows and its checks' (`trainspeed.plan` returns them to a Python caller)."""
    from trainspeed.atomic import check_writable_directory
    from trainspeed.errors import UsageError
    from trainspeed.plan.check import (
        best_check_line,
        check_dirs,
        check_exported,
        check_line,
        check_recipe,
        check_runnable,
        check_runs,
        checks_of_runs,
        chosen,
        run_checks,
    )
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model
    from trainspeed.plan.plain_count import plain_summary
    from trainspeed.plan.plan import default_grid, plan_rows, table, verdict
    from trainspeed.plan.rows import PlanCheckRow, PlanRow
    from trainspeed.rows import append_row
    from trainspeed.subcommands import CommandFailed
    from trainspeed.user_json import check_rows_file

    targets = checked_targets(args.targets) if args.targets is not None else None
    if args.measure and (args.budget_s is None or args.measure_dir is None):
        raise UsageError("plan: --measure needs --budget-s (the seconds it may spend) and --measure-dir (a new or "
                         "empty folder for what it runs)")
    if not args.measure and (args.budget_s is not None or args.measure_dir is not None):
        raise UsageError("plan: --budget-s and --measure-dir are --measure's; give --measure too")
    if args.check and (args.out is None or args.check_dir is None):
        raise UsageError("plan: --check needs --out (where the checks' rows go) and --check-dir (where their runs go)")
    if args.checked and args.out is None:
        raise UsageError("plan: --checked needs --out (where the checks' rows go)")
    if args.check_exported is not None and not args.check:
        raise UsageError("plan: --check-exported is the folder --check trains; give --check too")
    if args.check_exported is not None and args.check_rebench:
        raise UsageError("plan: --check-rebench benches with torch; leave it out with --check-exported")
    if args.check_rebench and not args.check:
        raise UsageError("plan: --check-rebench benches again the configurations --check runs; give --check too")
    if args.check_seeds > 1 and not args.check:
        raise UsageError(f"plan: --check-seeds {args.check_seeds} is the number of runs of each --check configuration; "
                         "give --check too")
    if args.check_seed + args.check_seeds - 1 > INT_FLAG_MAX:
        raise UsageError(f"plan: --check-seed {args.check_seed} with --check-seeds {args.check_seeds} would train at "
                         f"seeds past {INT_FLAG_MAX:,}; give a smaller --check-seed")
    if args.workload is not None and not (args.check or args.measure):
        raise UsageError("plan: --workload names the workload --check trains and --measure runs; give it with one "
                         "of them")
    if args.out is not None:
        if args.out.is_dir():
            raise UsageError(f"plan: --out {args.out} is a directory; name a JSONL file, e.g. {args.out / 'plan.jsonl'}")
        if args.out.resolve() in {path.resolve() for path in args.inputs}:
            raise UsageError(f"plan: --out {args.out} is one of the inputs; append the plan to another file")
        check_rows_file(args.out, f"plan: --out {args.out}", kinds=(PlanRow.KIND, PlanCheckRow.KIND))
        check_writable_directory(args.out.parent, f"--out {args.out}")
    if args.measure:
        from trainspeed.plan.measure import check_measure_dir

        check_measure_dir(args.measure_dir)
    checks: list[PlanCheckRow] = []
    inputs = read_plan_inputs(args.inputs, args.borrow_steps)
    model = steps_model(inputs)  # no steps to the goal is the first thing to say
    grid = default_grid(inputs, targets, args.devices, args.global_batches, args.schedules, model, args.measure)
    if args.measure:
        inputs, model, grid = measured(args, inputs, model, grid, targets)
    rows = plan_rows(inputs, grid, args.command_line, model)
    made_before = checks_of_runs(rows, args.checked, args.tolerance, args.command_line) if args.checked else []
    to_check = chosen(rows, args.check) if args.check else []
    recipe = check_recipe(inputs, model) if to_check else None
    dirs = check_dirs(recipe, to_check, args.check_dir) if recipe is not None else {}
    if recipe is not None:
        check_runnable(inputs, recipe, args.workload)
        if args.check_exported is not None:
            check_exported(args.check_exported, to_check)
        runs = check_runs(recipe, to_check, dirs, range(args.check_seed, args.check_seed + args.check_seeds),
                          args.check_exported)
        check_train_flags({run.row.config: run.command for run in runs}, exported=args.check_exported is not None)
        rebench = _rebench(args, inputs, recipe.workload, to_check)
        check_writable_directory(args.check_dir, f"--check-dir {args.check_dir}")  # the last check: it makes the folder
    print(f"plan: {inputs.identity} to {inputs.until}")
    print(table(rows))
    print(verdict(rows, model.note))
    if args.out is not None:
        for row in rows:
            append_row(args.out, row)
    if to_check:
        try:
            checks = run_checks(runs, args.tolerance, rebench)
        except CommandFailed as error:
            raise UsageError(f"plan: {error}") from None
        for check in checks:
            append_row(args.out, check)
        line = best_check_line(checks)
        if line:
            print(line)
    for check in made_before:
        append_row(args.out, check)
        print(check_line(check))
        checks.append(check)
    if checks:
        print(plain_summary(checks))
    if args.out is not None:
        print(f"plan: rows in {args.out}")
    return [*rows, *checks]


def _rebench(args: argparse.Namespace, inputs: PlanInputs, workload: str,
             rows: Sequence[PlanRow]) -> Callable[[PlanRow], Any] | None:
    """`--check-rebench`: a configuration's bench row measured again, into the check folder; each
    bench's settings refused (one line) before anything is written or run."""
    if not args.check_rebench:
        return None
    from trainspeed.plan.speed_now import check_rebenchable, rebench

    check_rebenchable(inputs, rows, workload, args.check_dir)
    return lambda row: rebench(inputs, row, workload, args.check_dir)


def measured(args: argparse.Namespace, inputs: PlanInputs, model: StepsModel, grid: PlanGrid,
             targets: tuple[str, ...] | None) -> tuple[PlanInputs, StepsModel, PlanGrid]:
    """`--measure`: what the plan lacks, estimated, taken within the budget (one line where even the
    smallest does not fit, before anything is written), run, and read beside the inputs."""
    from trainspeed.atomic import check_writable_directory
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.measure import bench_threads, lacking, run_measurements, within_budget
    from trainspeed.plan.model import overheads, steps_model
    from trainspeed.plan.plan import default_grid

    micro = overheads(inputs, model.base_run).micro_batches
    wants, runs, no_runs = lacking(inputs, grid, model, micro, args.measure_dir, args.workload)
    chosen, left_out = within_budget(inputs, wants, runs, args.budget_s, args.measure_dir,
                                     bench_threads(inputs, model))
    if not chosen:
        print("measure: nothing lacking" if not left_out else "measure: nothing fits the budget")
        return inputs, model, grid
    check_measure_flags(chosen)
    check_writable_directory(args.measure_dir, f"--measure-dir {args.measure_dir}")
    total = sum(measurement.estimate_s for measurement in chosen)
    print(f"measure: {len(chosen)} measurement(s), ~{total:,.0f} s of the {args.budget_s:,.0f} s budget")
    for line in left_out:
        print(f"measure: left out (over the budget): {line}")
    if no_runs:
        print(f"measure: no short runs: {no_runs}")
    started = time.monotonic()
    outputs = run_measurements(chosen, args.budget_s)
    print(f"measure: took {time.monotonic() - started:,.0f} s of the {args.budget_s:,.0f} s budget")
    paths = [*args.inputs, *(path for path in outputs if path.exists())]
    inputs = read_plan_inputs(paths, args.borrow_steps)
    model = steps_model(inputs)
    grid = default_grid(inputs, targets or grid.targets, args.devices or grid.devices,
                        args.global_batches or grid.global_batches, args.schedules, model)
    return inputs, model, grid


def _parser_of_runs() -> argparse.ArgumentParser:
    """The parser of the commands a plan runs (`trainspeed train`, `trainspeed bench`), each built
    by its own module as the whole command line builds it."""
    parser = OneLineParser(prog="trainspeed")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_bench_command(subparsers)
    add_train_command(subparsers)
    return parser


def check_train_flags(commands: dict[str, list[str]], exported: bool = False) -> None:
    """Each check's `trainspeed train` flags read by train's own parser before anything is written:
    a value the study's rows hand down that train refuses (more threads than this machine's CPUs, a
    learning rate past a float) is one line now, not a failed run after the plan's rows were appended.
    A check of exported steps is also held to what `train --exported` takes."""
    from trainspeed.errors import UsageError
    from trainspeed.exported.train import refuse_unsupported
    from trainspeed.train.flags import config_of_command

    parser = _parser_of_runs()
    for config, command in commands.items():
        try:
            parser.parse_args(command)
            if exported:
                refuse_unsupported(config_of_command(command))
        except UsageError as error:
            raise UsageError(f"plan: --check {config}: its `trainspeed train` would refuse the recipe's settings: "
                             f"{error}") from None


def check_measure_flags(measurements: Sequence[Measurement]) -> None:
    """Each measurement's command read by its own parser before anything is written: a setting of
    the base run's that this machine refuses (more threads than its CPUs) is one line now, not a
    failed measurement after the folder was made."""
    from trainspeed.errors import UsageError

    parser = _parser_of_runs()
    for measurement in measurements:
        try:
            parser.parse_args(list(measurement.command))
        except UsageError as error:
            raise UsageError(f"plan: --measure: {measurement.what}: its `trainspeed {measurement.command[0]}` would "
                             f"refuse the settings it is made of: {error}") from None


def checked_targets(targets: tuple[str, ...]) -> tuple[str, ...]:
    """`--targets`: names the target registry knows (family, mode, precision), whether or not their
    device is here (a plan predicts for devices elsewhere); an unknown one is one line, never a row
    "not measured" that hides the typo."""
    from trainspeed.errors import UsageError
    from trainspeed.targets import check_target_name

    for target in targets:
        try:
            check_target_name(target)
        except UsageError as error:
            raise UsageError(f"plan: --targets: {error}") from None
    return targets
