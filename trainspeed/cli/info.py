"""`trainspeed info`: the targets usable on this machine, and why the others are not."""

from __future__ import annotations

import argparse


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
