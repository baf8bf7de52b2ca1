"""`trainspeed train`: flags -> TrainConfig -> launch. Every default lives in TrainConfig, every flag in
its table (`trainspeed.train.flags`), which also writes a TrainConfig back into its command."""

from __future__ import annotations

import argparse

from trainspeed.flags import add_flags, config_from_flags
from trainspeed.train.config import TrainConfig
from trainspeed.train.flags import TRAIN_FLAGS

EPILOG = """\
examples:
  trainspeed train --workload mahjong --data shards/ --target cpu:eager:fp32 --nproc 2 \\
      --batch-size-per-device 1024 --steps 500
  trainspeed train --synthetic-data --nproc 2 --steps 200      # the same loop without data IO
  trainspeed train ... --checkpoint-every 100 --resume         # continue from the latest checkpoint
  trainspeed train ... --until 'val/accuracy>=0.9' --eval-every-samples 65536 --stop-at-target
  trainspeed train --exported exported/ --data shards/ --batch-size-per-device 256 --steps 500   # JAX only
multi-node (run on every node): --nnodes 2 --rdzv-endpoint node0:29500 [--rdzv-id job42]
  or with fixed node ranks:       --nnodes 2 --rdzv-backend static --node-rank R --rdzv-endpoint node0:29500
  jax targets: one process per host, one program over all their devices: fixed node ranks, and
  --nproc every device of the host (the host group meets one port above the endpoint's)
"""


def add_train_command(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="data-parallel training with per-device data IO",
        description="Train one model replica per device (torchrun + DDP, or SPMD on XLA), each rank "
        "reading its own shards; report end-to-end samples/s, data wait and IO efficiency.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, TrainConfig, TRAIN_FLAGS)
    parser.set_defaults(handler=run_train_command)
    return parser


def run_train_command(args: argparse.Namespace) -> int:
    config = config_from_flags(TrainConfig, args)
    if config.exported is not None:
        from pathlib import Path

        from trainspeed.exported.train import train_exported

        return train_exported(Path(config.exported), config)
    from trainspeed.train.launch import launch

    return launch(config)
