"""`trainspeed check`: is a workload's step ported to XLA? Fallback ops (and the lines that call
them), compiles in steady state, host syncs per step, and a one-line verdict."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from trainspeed.bench.port_check_config import PortCheckConfig
from trainspeed.flags import WORKLOAD_HELP, add_flag, config_from_flags, seed_value

if TYPE_CHECKING:
    from trainspeed.bench.port_check_rows import PortCheck


def add_check_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="port check on an XLA target (ops that fall back to the host, recompiles, host syncs per step), or a "
             "jax target's step lowered for a platform (tpu) without its device",
        description="Run a few training steps of a workload on an xla:* target and say what keeps its step from "
                    "running whole on the device: aten ops torch_xla runs on the host (with the Python line that "
                    "called each), compilations after the warm-up, and device-to-host transfers per step. Exit 0 "
                    "when it ran (findings or not; --strict: 1 with findings), 2 for bad input.",
    )
    add_flag(parser, "--workload", PortCheckConfig, "workload", WORKLOAD_HELP)
    add_flag(parser, "--size", PortCheckConfig, "size", "workload size (default: the workload's default size)")
    add_flag(parser, "--target", PortCheckConfig, "target", "an xla:* target, e.g. xla:lazy:bf16")
    add_flag(parser, "--batch-size", PortCheckConfig, "batch_size", "samples per step")
    add_flag(parser, "--warmup-steps", PortCheckConfig, "warmup_steps", "steps before the measured ones (they compile)")
    add_flag(parser, "--steps", PortCheckConfig, "steps", "measured steps")
    add_flag(parser, "--seed", PortCheckConfig, "seed", "seed of the model and the synthetic batch", type=seed_value)
    add_flag(parser, "--out", PortCheckConfig, "out", "write the result as JSON to this new file")
    add_flag(parser, "--strict", PortCheckConfig, "strict", "exit 1 when the check finds anything (for CI)")
    add_flag(parser, "--platform", PortCheckConfig, "platform", "a jax:* target: lower the step for this platform "
             "(tpu, cpu, cuda) here, without its device, and name each op that does not lower")
    parser.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    from trainspeed.bench.port_check import StepFailed

    try:
        check = port_check(args)
    except StepFailed as error:
        print(f"trainspeed: error: {error}", file=sys.stderr)
        return 1
    return 1 if args.strict and not check.ported else 0


def port_check(args: argparse.Namespace) -> "PortCheck":
    """Run the check the flags describe, print it and write it where --out says, and return it
    (`trainspeed.check` returns it to a Python caller); StepFailed where the step raised."""
    from trainspeed.bench.port_check import check_out, run_port_check, write_check

    config = dataclasses.replace(config_from_flags(PortCheckConfig, args), command=args.command_line)
    check_out(config.out)
    check = run_port_check(config)
    print("\n".join(check.lines()), flush=True)
    if config.out is not None:
        write_check(config.out, check)
        print(f"result written to {config.out}")
    return check

