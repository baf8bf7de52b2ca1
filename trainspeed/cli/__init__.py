"""Command line: `trainspeed info | bench | export | plot | report | study | train | serve | data | eval ...`, one module per command.

The commands are the top layer: each turns flags into a config, calls the packages below (bench,
train, report, a workload's data tools) and prints. Every handler returns an exit code. Bad input
raises UsageError, which becomes one line `trainspeed: error: ...` and exit code 2 (argparse's own
convention for usage errors); a device that goes away mid-run (DeviceLost: a remote server died)
is one such line too, with exit code 1.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import NoReturn

from trainspeed.cli.bench import add_bench_command
from trainspeed.cli.check import add_check_command
from trainspeed.cli.data import add_data_commands
from trainspeed.cli.eval import add_eval_commands
from trainspeed.cli.export import add_export_command
from trainspeed.cli.info import add_info_command
from trainspeed.cli.plan import add_plan_command
from trainspeed.cli.plot import add_plot_command
from trainspeed.cli.report import add_report_command
from trainspeed.cli.serve import add_serve_command
from trainspeed.cli.study import add_study_command
from trainspeed.cli.train import add_train_command
from trainspeed.atomic import shown_names
from trainspeed.errors import DeviceLost, ServerRefused, UsageError
from trainspeed.flags import OneLineParser
from trainspeed.process_end import end_process


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="trainspeed", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_info_command(subparsers)
    add_bench_command(subparsers)
    add_check_command(subparsers)
    add_export_command(subparsers)
    add_plot_command(subparsers)
    add_report_command(subparsers)
    add_study_command(subparsers)
    add_plan_command(subparsers)
    add_train_command(subparsers)
    add_serve_command(subparsers)
    add_data_commands(subparsers)
    add_eval_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)  # argparse's own errors and flag types raise UsageError
        args.command_line = shlex.join(["trainspeed", *(sys.argv[1:] if argv is None else argv)])
        return args.handler(args)
    except UsageError as error:
        _error_line(error)
        return 2
    except (DeviceLost, ServerRefused) as error:
        _error_line(error)
        return 1
    except KeyboardInterrupt:
        print("trainspeed: interrupted", file=sys.stderr)
        return 130


def _error_line(error: Exception) -> None:
    """The one line of a refusal, on any stream: a name it quotes whose bytes are not UTF-8 (a data
    folder's) shown as `\\xNN` (`shown_names`), as the pages show it."""
    print(f"trainspeed: error: {shown_names(str(error))}", file=sys.stderr)


def program() -> NoReturn:
    """The `trainspeed` program: `main` on the process's arguments, then the process ends without
    the interpreter's finalization (`trainspeed.process_end`)."""
    end_process(main())
