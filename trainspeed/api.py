"""trainspeed's commands as Python functions: `trainspeed.bench(workload=..., targets=[...],
batch_sizes=[...])` runs what `trainspeed bench --workload ... --targets ... --batch-sizes ...` runs,
in the caller's process, and returns the rows it wrote.

A function is its command's own parser, read the other way round: each keyword is a flag of the
command (`--batch-sizes` is `batch_sizes=`, a positional argument its name: `plan(inputs=[...])`),
found in the parser the command line builds (`trainspeed.cli.build_parser`), so a flag added to a
command, or to a flag table such as train's, is a keyword the same moment. A value is written as
its flag takes it (a list comma-separated, a switch given where True, a workload of
`workload_from` by its reference) and read back by that parser, so a bad value is the command
line's own error: `trainspeed.UsageError` with the same one line, and nothing exits the
interpreter. The command then runs as it does from the shell (printing what it prints, writing
what it writes) and its rows come back typed, in `Rows`.

A workload of pieces that only this process holds (a lambda, a notebook cell's function) runs
wherever the command runs in this process: bench, check, one rank of train, plan and report. A
command that starts other processes to run it (train on several ranks, a study, a plan's checks)
says so in one line before it starts anything. Where those processes rebuild pieces defined in the
caller's script, they run its definitions alone, never what it does (`script_definitions`).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import inspect
import numbers
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from trainspeed.cli import build_parser
from trainspeed.errors import UsageError
from trainspeed.flags import flag_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from trainspeed.train.runs import TrainRun

COMMANDS = ("bench", "check", "train", "plan", "report", "study")
"""The commands that are functions of the package (`trainspeed.bench` ...)."""


class KeywordTypeError(UsageError, TypeError):
    """A keyword given a value of a type its flag cannot take (a dict for a path, a list for one
    number): refused before it is written as the flag's text, which would have made it a file named
    `{'a': 1}`. A UsageError as every bad argument is, and a TypeError as Python's own are."""


class TrainingFailed(RuntimeError):
    """`train` ended without finishing its run: a rank failed or a signal stopped it (after a
    checkpoint; `resume=True` continues it). What it printed says why; `exit_code` is the command's."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --- the rows a command returns ---------------------------------------------------------------------

class Rows(list):
    """The rows a command wrote, each its kind's dataclass (`ResultRow`, `RunSummary`, `PlanRow` ...),
    in the order written. `to_pandas()` makes a table of them, `figure()` the figure `trainspeed
    plot` draws of them; `path` is where they were written, `runs` the run directories read."""

    def __init__(self, rows: Iterable[Any] = (), path: Path | None = None, runs: Iterable["TrainRun"] = ()) -> None:
        super().__init__(rows)
        self.path = path
        self.runs: list[TrainRun] = list(runs)

    def of(self, row_type: type) -> "Rows":
        """The rows of one dataclass: `rows.of(EvalRecord)`."""
        return Rows((row for row in self if isinstance(row, row_type)), self.path, self.runs)

    @property
    def summary(self) -> Any:
        """The run's summary (`RunSummary`) of what `train` returned; None for other rows."""
        return self.runs[-1].summary if self.runs else None

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one line per row: a `kind` column, then the row's fields (nested ones
        as `machine.cpu_model` ...). pandas is not one of trainspeed's dependencies."""
        try:
            import pandas
        except ImportError:
            raise UsageError("Rows.to_pandas() needs pandas, which is not installed here: pip install pandas") from None
        records = [{"kind": getattr(type(row), "KIND", type(row).__name__), **dataclasses.asdict(row)} for row in self]
        return pandas.json_normalize(records, sep=".") if records else pandas.DataFrame()

    def figure(self, baseline: str | None = None) -> "Figure":
        """The figure of these rows that `trainspeed plot` draws, as a matplotlib Figure (a notebook
        shows it inline): bench rows' ratios and samples/s (to `baseline`, default the first
        target), a run's curves, a plan's checks."""
        from trainspeed.bench.results import ResultRow
        from trainspeed.plan.rows import PlanCheckRow

        bench = [row for row in self if isinstance(row, ResultRow)]
        checks = [row for row in self if isinstance(row, PlanCheckRow)]
        if bench:
            from trainspeed.bench.report import build_figure

            figure = build_figure(bench, baseline)
        elif self.runs:
            from trainspeed.report.figures import caption_machines
            from trainspeed.train.figures import curves_figure, noise_scale_figure

            noise = [run for run in self.runs if run.noise_curve]
            curves = [run for run in self.runs if run.train_curve or run.val_curve]
            if not noise and not curves:
                raise UsageError("the runs logged no metrics rows to draw (log_every= sets how often they do)")
            figure = noise_scale_figure(noise) if noise else curves_figure(curves)
            caption_machines(figure, [run.row for run in (noise or curves)])
        elif checks:
            from trainspeed.plan.report import check_figure
            from trainspeed.report.figures import caption_machines

            figure = check_figure(checks)
            caption_machines(figure, checks)
        else:
            kinds = sorted({getattr(type(row), "KIND", type(row).__name__) for row in self})
            raise UsageError(f"no figure of {', '.join(kinds) or 'no'} rows: figures draw bench rows, runs and a "
                             "plan's checks; trainspeed.report(...) shows every kind")
        return _detached(figure)

    def _repr_html_(self) -> str | None:
        """A notebook shows the rows as a table, where pandas is installed."""
        try:
            return self.to_pandas()._repr_html_()
        except UsageError:
            return None


def _detached(figure: "Figure") -> "Figure":
    """The figure, no longer held by pyplot (a notebook that draws many keeps none of them alive),
    and shown inline by IPython where this runs in a notebook: its PNG is the figure's own."""
    import matplotlib.pyplot as plt

    plt.close(figure)
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is not None:
        from matplotlib.figure import Figure

        def png(shown: Figure) -> bytes:
            import io

            buffer = io.BytesIO()
            shown.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
            return buffer.getvalue()

        shell.display_formatter.formatters["image/png"].for_type(Figure, png)
    return figure


# --- a command's keywords are its parser's flags -----------------------------------------------------

def command_parser(command: str, study: str | None = None) -> argparse.ArgumentParser:
    """The parser of `trainspeed COMMAND` (`trainspeed study NAME`) as the command line builds it
    (built once: it only names the keywords; each call parses with a parser of its own)."""
    parser = _subparser(_command_line(), command)
    return _subparser(parser, study) if study is not None else parser


@functools.cache
def _command_line() -> argparse.ArgumentParser:
    return build_parser()


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if name not in action.choices:
                raise UsageError(f"no such command {name!r}: choose one of {', '.join(action.choices)}")
            return action.choices[name]
    raise UsageError(f"{parser.prog} has no commands below it")


def _subparser_names(parser: argparse.ArgumentParser) -> list[str]:
    return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


def flag_keywords(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each keyword of a command's function and the parser's action it sets: a flag without its
    dashes, `-` as `_` (`--batch-sizes`: `batch_sizes`), a positional argument by its name."""
    keywords: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            long = max(action.option_strings, key=len)
            keywords[long.lstrip("-").replace("-", "_")] = action
        else:
            keywords[action.dest] = action
    return keywords


def _text(value: Any) -> str:
    """A value as its flag takes it: a workload of `workload_from` by its reference, a path as
    itself, a list comma-separated, a float in the fewest digits that read back the same."""
    reference = getattr(value, "reference", None)
    if isinstance(reference, str):
        return reference
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_text(item) for item in value)
    return flag_text(value)


def _takes_many(action: argparse.Action) -> bool:
    """Whether the flag takes a list: comma-separated, given again, or several positional values."""
    return (type(action).__name__ == "CommaListAction" or isinstance(action, argparse._AppendAction)
            or action.nargs in ("+", "*"))


def _flag_value(value: Any, path: bool) -> bool:
    """Whether `value` is one value a flag takes: text, a path, a number, a workload of
    `workload_from` (`path`: a path flag, which takes text or a path only)."""
    if isinstance(value, (str, os.PathLike)):
        return True
    if path:
        return False
    return isinstance(getattr(value, "reference", None), str) or isinstance(value, numbers.Real)


def _check_type(command: str, keyword: str, action: argparse.Action, value: Any) -> None:
    """KeywordTypeError, in one line, for a value its flag cannot take."""
    many = _takes_many(action)
    path = action.type is Path
    items = value if many and isinstance(value, (list, tuple)) else [value]
    if all(_flag_value(item, path) for item in items):
        return
    wrong = next(item for item in items if not _flag_value(item, path))
    what = ("a workload of trainspeed.workload_from or a workload's name" if keyword == "workload"
            else "a path (text or a pathlib.Path)" if path else "text, a number or a path")
    inside = f" holding {_a_type(wrong)}" if wrong is not value else ""
    raise KeywordTypeError(f"{command}: {keyword}= is {_a_type(value)}{inside}; give {what}"
                           f"{', or a list of them' if many else ''}")


def _a_type(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _flag(name: str, text: str) -> list[str]:
    return [f"{name}={text}"] if text.startswith("-") else [name, text]


def command_argv(command: str, parser: argparse.ArgumentParser, values: dict[str, Any]) -> list[str]:
    """The command line's arguments that say what `values` say (None: the flag's default)."""
    keywords = flag_keywords(parser)
    unknown = [keyword for keyword in values if keyword not in keywords]
    if unknown:
        close = difflib.get_close_matches(unknown[0], keywords, n=1)
        raise UsageError(f"{command}: no keyword {unknown[0]}={', did you mean ' + close[0] + '=?' if close else ''}; "
                         f"it takes {', '.join(keywords)} (the flags of `trainspeed {command} --help`)")
    options: list[str] = []
    positionals: list[str] = []
    for keyword, value in values.items():
        if value is None:
            continue
        action = keywords[keyword]
        if action.nargs != 0:  # a switch is checked below
            _check_type(command, keyword, action, value)
        if not action.option_strings:
            items = value if isinstance(value, (list, tuple)) else [value]
            positionals += [_text(item) for item in items]
            continue
        name = max(action.option_strings, key=len)
        if action.nargs == 0:  # a switch
            if not isinstance(value, bool):
                raise KeywordTypeError(f"{command}: {keyword}= is a switch ({name}); give True or False, "
                                       f"not {value!r}")
            options += [name] if value else []
        elif isinstance(action, argparse._AppendAction):
            for item in value if isinstance(value, (list, tuple)) else [value]:
                options += _flag(name, _text(item))
        else:
            options += _flag(name, _text(value))
    if any(text.startswith("-") for text in positionals):
        return [*options, "--", *positionals]
    return [*positionals, *options]


def parse_command(command: str, values: dict[str, Any], study: str | None = None) -> argparse.Namespace:
    """The namespace the command line builds for these keywords, and the command it stands for
    (`args.command_line`, recorded in the rows); UsageError with the command line's own message."""
    argv = [command, *([study] if study is not None else []),
            *command_argv(command, command_parser(command, study), values)]
    args = build_parser().parse_args(argv)
    args.command_line = shlex.join(["trainspeed", *argv])
    return args


# --- a workload the processes a command starts must rebuild ------------------------------------------

def _check_children_rebuild(command: str, workload: Any, processes: str) -> None:
    """A workload of pieces that other processes of this command rebuild: its pieces can be imported."""
    unportable = getattr(workload, "unportable", None)
    if unportable:
        raise UsageError(f"{command}: {processes} cannot rebuild workload {getattr(workload, 'name', '')!r} "
                         f"({'; '.join(unportable)}): run it in this process (train: nproc=1), or define its pieces "
                         "at the top level of a script or module and give those")


def _train_processes(args: argparse.Namespace) -> str | None:
    """The processes of a training that rebuild its workload, in words (None: it runs here)."""
    world = args.__dict__.get("launch.nproc", 1) * args.__dict__.get("launch.nnodes", 1)
    if world <= 1:
        return None
    from trainspeed.targets import target_family

    if target_family(args.target).data_parallel == "spmd":
        return None
    return f"the {world} rank processes of this run"


# --- the commands ------------------------------------------------------------------------------------

def _with_workload_size(command: str, values: dict[str, Any], study: str | None) -> dict[str, Any]:
    """A workload of `workload_from` has one size of its own (`default`): a command that takes `--size`
    is given it unless the caller gave one, as a study's `--size` defaults to its preset's (`tiny`)."""
    workload = values.get("workload")
    own_size = getattr(workload, "default_size", None)
    if not isinstance(getattr(workload, "reference", None), str) or values.get("size") is not None:
        return values
    if "size" not in flag_keywords(command_parser(command, study)):
        return values
    return {**values, "size": own_size}


def _run(command: str, values: dict[str, Any], study: str | None = None) -> Rows:
    values = _with_workload_size(command, values, study)
    args = parse_command(command, values, study)
    workload = values.get("workload")
    if command == "train":
        processes = _train_processes(args)
        if processes is not None:
            _check_children_rebuild(command, workload, processes)
        return _train(args)
    if command == "study":
        _check_children_rebuild(f"study {study}", workload, "the commands this study runs")
    if command == "plan" and args.check:
        _check_children_rebuild(command, workload, "the check runs")
    return RUNNERS[command](args)


def _bench(args: argparse.Namespace) -> Rows:
    from trainspeed.cli.bench import bench_rows

    return Rows(bench_rows(args), path=args.out)


AUTOGRAD_QUEUES = "device_ready_queues_"
"""What PyTorch's assert says where a backward ran in this process before the XLA device existed."""


def _check(args: argparse.Namespace) -> Rows:
    from trainspeed.bench.port_check import StepFailed
    from trainspeed.cli.check import port_check

    try:
        return Rows([port_check(args)], path=args.out)
    except StepFailed as error:
        if AUTOGRAD_QUEUES in str(error):
            raise UsageError("check: this process ran a backward pass before torch_xla's device existed, which "
                             "PyTorch's autograd cannot take back; check before anything trains here (or "
                             "`import torch_xla; torch_xla.device()` first), or run `trainspeed check` from a shell") from None
        raise


def _train(args: argparse.Namespace) -> Rows:
    from trainspeed.cli.train import run_train_command
    from trainspeed.train.runs import read_run

    code = run_train_command(args)
    out = Path(args.out_dir)
    if code != 0:
        raise TrainingFailed(f"train: the run in {out} ended with exit code {code} (what it printed says why; "
                             "resume=True continues it from its latest checkpoint)", code)
    run = read_run(out)
    return Rows(run.metrics or (run.summary,), path=out, runs=[run])


def _plan(args: argparse.Namespace) -> Rows:
    from trainspeed.cli.plan import planned_rows

    return Rows(planned_rows(args), path=args.out)


def _report(args: argparse.Namespace) -> Rows:
    from trainspeed.cli.report import report_inputs

    return _rows_read(report_inputs(args), args.out)


def _study(args: argparse.Namespace) -> Rows:
    from trainspeed.cli.study import study_files
    from trainspeed.kinds import read_inputs

    files = study_files(args)
    return _rows_read(read_inputs(files), args.out) if files else Rows(path=args.out)


def _rows_read(inputs: Any, path: Path) -> Rows:
    from trainspeed.train.runs import TrainRun

    reads = [read for kind_rows in inputs.rows.values() for read in kind_rows]
    runs = [read for read in reads if isinstance(read, TrainRun)]
    return Rows((read.row for read in reads), path=path, runs=runs)


RUNNERS: dict[str, Callable[[argparse.Namespace], Rows]] = {
    "bench": _bench, "check": _check, "train": _train, "plan": _plan, "report": _report, "study": _study}


def command_function(command: str) -> Callable[..., Rows]:
    """`trainspeed.COMMAND`: its keywords are the command's flags (`flag_keywords`)."""

    def function(**values: Any) -> Rows:
        return _run(command, values)

    function.__name__ = function.__qualname__ = command
    function.__doc__ = (f"`trainspeed {command}` in this process: each keyword is one of its flags without the "
                        f"dashes (`trainspeed {command} --help` lists them), and the rows it wrote come back as "
                        "`Rows`; bad input raises trainspeed.UsageError with the command line's message.")
    function.__signature__ = _signature(command_parser(command))  # type: ignore[attr-defined]
    return function


def _signature(parser: argparse.ArgumentParser, leading: tuple[inspect.Parameter, ...] = ()) -> inspect.Signature:
    """The keywords as `help()` and a notebook's completion show them, each defaulting to None (the
    flag's own default)."""
    return inspect.Signature([*leading, *(inspect.Parameter(keyword, inspect.Parameter.KEYWORD_ONLY, default=None)
                                           for keyword in flag_keywords(parser))])


def study(name: str, **values: Any) -> Rows:
    """`trainspeed study NAME` in this process: each keyword is one of its flags without the dashes
    (`trainspeed study NAME --help`), and the rows the study wrote come back as `Rows`."""
    if not isinstance(name, str):
        raise KeywordTypeError(f"study: the study's name is {_a_type(name)}; give one of "
                               f"{', '.join(_subparser_names(command_parser('study')))}")
    return _run("study", values, study=name)


bench = command_function("bench")
check = command_function("check")
train = command_function("train")
plan = command_function("plan")
report = command_function("report")
