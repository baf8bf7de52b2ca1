"""`trainspeed train`: flags -> TrainConfig -> launch."""

from __future__ import annotations

import argparse

from trainspeed.train.config import LR_SCALING_RULES, RDZV_BACKENDS, LaunchConfig, LRConfig, TrainConfig
from trainspeed.train.launch import launch

EPILOG = """\
examples:
  trainspeed train --workload mahjong --data shards/ --target cpu:eager:fp32 --nproc 2 \\
      --batch-size-per-device 1024 --steps 500
  trainspeed train --synthetic-data --nproc 2 --steps 200      # the same loop without data IO
  trainspeed train ... --checkpoint-every 100 --resume         # continue from the latest checkpoint
multi-node (run on every node): --nnodes 2 --rdzv-endpoint node0:29500 [--rdzv-id job42]
"""


def add_train_command(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "train",
        help="data-parallel training with per-device data IO",
        description="Train one model replica per device (torchrun + DDP, or XLA SPMD), each rank "
        "reading its own shards; report end-to-end samples/s, data wait and IO efficiency.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_argument_group("what to train")
    what.add_argument("--workload", default="mahjong", help="mahjong, stylegan3 or package.module:factory")
    what.add_argument("--size", default="small", help="model size of the workload (default: small)")
    what.add_argument("--data", help="dataset directory (or file) of the workload")
    what.add_argument("--synthetic-data", action="store_true", help="no data IO: cycle synthetic batches")
    what.add_argument("--target", default="cpu:eager:fp32", help="device:mode:precision (default: cpu:eager:fp32)")

    how_long = parser.add_argument_group("how long")
    how_long.add_argument("--steps", type=int, help="optimizer steps")
    how_long.add_argument("--epochs", type=float, help="passes over the training split (real data only)")
    how_long.add_argument("--batch-size-per-device", type=int, default=1024)
    how_long.add_argument("--seed", type=int, default=0)

    where = parser.add_argument_group("where (torchrun)")
    where.add_argument("--nproc", type=int, default=1, help="processes (devices) per node")
    where.add_argument("--nnodes", type=int, default=1)
    where.add_argument("--node-rank", type=int, default=0, help="this node's rank (static rendezvous only)")
    where.add_argument("--rdzv-backend", choices=RDZV_BACKENDS, default="c10d")
    where.add_argument("--rdzv-endpoint", help="HOST:PORT reachable from every node")
    where.add_argument("--rdzv-id", default="trainspeed", help="job id shared by the nodes of one run")
    where.add_argument("--collective-timeout-s", type=float, default=300.0,
                       help="a collective waiting longer than this fails instead of hanging")
    where.add_argument("--num-workers", type=int, default=1, help="loader worker processes per rank")
    where.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")

    lr = parser.add_argument_group("learning rate (peak = lr x scale(global batch / reference batch))")
    lr.add_argument("--lr", type=float, help="base LR at the reference batch (default: the workload's)")
    lr.add_argument("--lr-scaling", choices=LR_SCALING_RULES, default="sqrt")
    lr.add_argument("--lr-reference-batch", type=int, default=512)
    lr.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default: 5%% of the run)")
    lr.add_argument("--min-lr-ratio", type=float, default=0.1, help="final LR / peak LR of the cosine")

    output = parser.add_argument_group("output")
    output.add_argument("--out", default="runs/train", help="run directory (metrics, checkpoints, summary)")
    output.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: end only)")
    output.add_argument("--resume", action="store_true", help="continue from the run directory's latest checkpoint")
    output.add_argument("--eval-every", type=int, default=0, help="steps between validations (0: end only)")
    output.add_argument("--eval-batches", type=int, help="cap on validation batches per rank")
    output.add_argument("--log-every", type=int, default=10)
    output.add_argument("--timing-warmup-steps", type=int, default=5, help="steps left out of steady samples/s")
    output.add_argument("--bench-jsonl", help="bench results to compute the IO efficiency against")
    output.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run_train_command)
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        workload=args.workload,
        size=args.size,
        target=args.target,
        data=args.data,
        synthetic_data=args.synthetic_data,
        batch_size_per_device=args.batch_size_per_device,
        steps=args.steps,
        epochs=args.epochs,
        seed=args.seed,
        num_workers=args.num_workers,
        threads=args.threads,
        out_dir=args.out,
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        log_every=args.log_every,
        timing_warmup_steps=args.timing_warmup_steps,
        bench_jsonl=args.bench_jsonl,
        progress=not args.no_progress,
        lr=LRConfig(
            base_lr=args.lr,
            scaling=args.lr_scaling,
            reference_batch=args.lr_reference_batch,
            warmup_steps=args.warmup_steps,
            min_lr_ratio=args.min_lr_ratio,
        ),
        launch=LaunchConfig(
            nproc=args.nproc,
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            rdzv_backend=args.rdzv_backend,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_id=args.rdzv_id,
            collective_timeout_s=args.collective_timeout_s,
        ),
    )


def run_train_command(args: argparse.Namespace) -> int:
    return launch(config_from_args(args))
