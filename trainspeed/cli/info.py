"""`trainspeed info`: the targets usable on this machine and the workloads it can build, and why
the others are not."""

from __future__ import annotations

import argparse


def add_info_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("info", help="targets and workloads usable on this machine, and why others are not")
    parser.set_defaults(handler=run_info)


def run_info(args: argparse.Namespace) -> int:
    from trainspeed.machine import Machine
    from trainspeed.targets import available_targets

    machine = Machine.at_start()
    print(f"torch {machine.torch_version}, torch_xla {machine.torch_xla_version or 'not installed'}, "
          f"python {machine.python_version}, {machine.torch_threads} CPU threads; {machine.cpu_model}, "
          f"{machine.cores_usable} of {machine.cores_total} cores usable, load average {machine.load_average_start}")
    for name, reason in available_targets().items():
        print(f"  {name:<24} {'available' if reason is None else 'unavailable: ' + reason}")
    print_workload_families()
    return 0


def print_workload_families() -> None:
    """The built-in workloads, then each library family with how many names it builds here."""
    from trainspeed.errors import UsageError
    from trainspeed.workloads import BUILTIN_WORKLOADS
    from trainspeed.workloads.named import FAMILIES, family_names

    print("workloads:")
    print(f"  {'built-in':<24} {', '.join(BUILTIN_WORKLOADS)}")
    for family in FAMILIES.values():
        try:
            names = family_names(family)
        except UsageError as error:
            print(f"  {family.pattern:<24} unavailable: {error}")
            continue
        print(f"  {family.pattern:<24} {len(names)} models of {family.library}, e.g. {family.example}")
    print(f"  {'package.module:factory':<24} your own (docs/workloads.md)")
