"""Command line: `trainspeed info | bench | plot | train | data ...`.

Each command lives with its concern and registers itself here. Every handler returns an exit
code. Bad input raises UsageError, which becomes one line `trainspeed: error: ...` and exit code 2
(argparse's own convention for usage errors).
"""

from __future__ import annotations

import argparse
import sys

from trainspeed.errors import UsageError


def add_info_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("info", help="targets usable on this machine, and why others are not")
    parser.set_defaults(handler=run_info)


def run_info(args: argparse.Namespace) -> int:
    import torch

    from trainspeed.bench.environment import Environment
    from trainspeed.targets import available_targets

    environment = Environment.capture()
    print(f"torch {environment.torch_version}, torch_xla {environment.torch_xla_version or 'not installed'}, "
          f"python {environment.python_version}, {torch.get_num_threads()} CPU threads")
    for name, reason in available_targets().items():
        print(f"  {name:<24} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from trainspeed.bench.cli import add_bench_command
    from trainspeed.report.cli import add_plot_command
    from trainspeed.train.cli import add_train_command
    from trainspeed.data.cli import add_data_commands as add_mahjong_data_commands  # TODO(merge)
    from trainspeed.data.images import add_images_command as add_image_data_command  # TODO(merge)

    parser = argparse.ArgumentParser(prog="trainspeed", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_info_command(subparsers)
    add_bench_command(subparsers)
    add_plot_command(subparsers)
    add_train_command(subparsers)
    data_parser = subparsers.add_parser("data", help="make, import, inspect and verify datasets")
    data_subparsers = data_parser.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")
    add_mahjong_data_commands(data_subparsers)
    add_image_data_command(data_subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)  # flag types raise UsageError too (e.g. a bad --batch-sizes)
        return args.handler(args)
    except UsageError as error:
        print(f"trainspeed: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trainspeed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
