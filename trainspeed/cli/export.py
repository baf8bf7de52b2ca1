"""`trainspeed export`: a workload's training and validation steps, traced through the `jax` family,
serialized for a platform (a TPU) with the initial state and a manifest, for `bench --exported`
on a machine that has JAX only."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.bench.config import BATCH_SIZE_LIST
from trainspeed.flags import POSITIVE, WORKLOAD_HELP, seed_value


def add_export_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export",
        help="serialize a workload's step as jax.export artifacts for a machine that has JAX only (a TPU host)",
        description="Trace a workload's training step (and its validation sums) through a jax:jit:* target and "
                    "serialize it per batch size for --platform, with the initial state (npz) and a manifest; "
                    "`trainspeed bench --exported DIR` runs it there with JAX and numpy alone.",
    )
    parser.add_argument("--workload", default="mahjong", help=WORKLOAD_HELP)
    parser.add_argument("--size", default=None, help="workload size (default: the workload's default size)")
    parser.add_argument("--target", default="jax:jit:fp32", help="jax:jit:fp32 or jax:jit:bf16")
    parser.add_argument("--platform", default="tpu", help="what the artifacts run on: tpu, cpu, cuda or rocm")
    parser.add_argument("--batch-sizes", type=BATCH_SIZE_LIST, default=[64], help="one program per batch size, "
                        "e.g. 2^6..2^12")
    parser.add_argument("--initial-state", choices=("file", "drawn"), default="file",
                        help="file: every parameter as built, in state.npz; drawn: parameters of 4,096 elements or more "
                        "drawn on the device with their mean and standard deviation (a model whose weights would not "
                        "travel; for benches, not for training that must match another target)")
    parser.add_argument("--noise-scale-micro-batches", type=POSITIVE.parser(int), default=1, metavar="K",
                        help="also export each batch size's step in K equal slices, which returns the gradient norms "
                        "the noise-scale meter of `train --exported ... --noise-scale-micro-batches K` reads "
                        "(default 1: none; K must divide every batch size)")
    parser.add_argument("--micro-batch-size", type=POSITIVE.parser(int), default=None, metavar="N",
                        help="train each batch size above N in micro-batches of N samples, one after another in the "
                        "program, their gradients accumulated before one update: a batch larger than the device's "
                        "memory holds (N must divide every larger batch size; default: each batch whole)")
    parser.add_argument("--batch-rows", type=POSITIVE.parser(int), default=None, metavar="N",
                        help="samples of the synthetic batch the folder carries for `bench --exported` (default: the "
                        "largest batch size); a larger batch size repeats them in order (224 px images take 150 KB a "
                        "sample, which a size of 256 makes 38 MB)")
    parser.add_argument("--devices", type=POSITIVE.parser(int), default=None, metavar="N",
                        help="trace every program for a mesh of N devices, data parallel: each batch split over them, "
                        "the state copied to each, the gradient's all-reduce in the program; the host that runs it "
                        "needs N devices (a TPU v5e-8 host: 8; N must divide every batch size; default: one device, "
                        "no mesh). On a CPU the export makes N host devices itself")
    parser.add_argument("--seed", type=seed_value, default=0, help="seed of the model and the exported batch")
    parser.add_argument("--out", type=Path, required=True, help="a new folder to write")
    parser.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from trainspeed.exported.write import export_steps

    manifest = export_steps(args.workload, args.size, args.target, args.platform, list(args.batch_sizes), args.out,
                            seed=args.seed, command=args.command_line,
                            initial_state=args.initial_state, noise_scale_micro_batches=args.noise_scale_micro_batches,
                            micro_batch_size=args.micro_batch_size, batch_rows=args.batch_rows,
                            devices=args.devices)
    sizes = ",".join(str(size) for size in manifest.batch_sizes)
    over = "" if args.devices is None else f", each over {args.devices} device{'s' if args.devices > 1 else ''}"
    print(f"exported {manifest.workload}/{manifest.size} {manifest.target} for {','.join(manifest.platforms)}: "
          f"batch sizes {sizes}, {len(manifest.state)} state leaves"
          f"{f', each also in {args.noise_scale_micro_batches} slices' if args.noise_scale_micro_batches > 1 else ''}"
          f"{f', in micro-batches of {args.micro_batch_size}' if args.micro_batch_size else ''}{over}"
          f" -> {args.out}")
    return 0
