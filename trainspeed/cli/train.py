"""`trainspeed train`: flags -> TrainConfig -> launch. Every default lives in TrainConfig."""

from __future__ import annotations

import argparse

from trainspeed.flags import WORKLOAD_HELP, add_flag, config_from_flags
from trainspeed.train.config import LR_SCALING_RULES, RDZV_BACKENDS, TrainConfig

EPILOG = """\
examples:
  trainspeed train --workload mahjong --data shards/ --target cpu:eager:fp32 --nproc 2 \\
      --batch-size-per-device 1024 --steps 500
  trainspeed train --synthetic-data --nproc 2 --steps 200      # the same loop without data IO
  trainspeed train ... --checkpoint-every 100 --resume         # continue from the latest checkpoint
  trainspeed train ... --until 'val/accuracy>=0.9' --eval-every-samples 65536 --stop-at-target
multi-node (run on every node): --nnodes 2 --rdzv-endpoint node0:29500 [--rdzv-id job42]
  or with fixed node ranks:       --nnodes 2 --rdzv-backend static --node-rank R --rdzv-endpoint node0:29500
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

    def flag(group: argparse._ArgumentGroup, name: str, path: str, help: str, **kwargs) -> None:
        add_flag(group, name, TrainConfig, path, help, **kwargs)

    what = parser.add_argument_group("what to train")
    flag(what, "--workload", "workload", WORKLOAD_HELP)
    flag(what, "--size", "size", "model size of the workload (default: the workload's default size); a library "
         "model takes PRESET[,key=value...], e.g. tiny,n_layer=4 (docs/workloads.md)")
    flag(what, "--data", "data", "dataset directory (or file) of the workload")
    flag(what, "--synthetic-data", "synthetic_data", "no data IO: cycle synthetic batches")
    flag(what, "--target", "target", "device:mode:precision")

    how_long = parser.add_argument_group("how long")
    flag(how_long, "--steps", "steps", "optimizer steps")
    flag(how_long, "--epochs", "epochs", "passes over the training split (real data only)")
    flag(how_long, "--batch-size-per-device", "batch_size_per_device", "samples per device and step")
    flag(how_long, "--seed", "seed", "seed of the model, the data order and every rank's random numbers")

    where = parser.add_argument_group("where (torchrun)")
    flag(where, "--nproc", "launch.nproc", "processes (devices) per node")
    flag(where, "--nnodes", "launch.nnodes", "nodes of the job")
    flag(where, "--node-rank", "launch.node_rank", "this node's rank (static rendezvous only)")
    flag(where, "--rdzv-backend", "launch.rdzv_backend", "how nodes meet", choices=RDZV_BACKENDS)
    flag(where, "--rdzv-endpoint", "launch.rdzv_endpoint", "HOST:PORT reachable from every node")
    flag(where, "--rdzv-id", "launch.rdzv_id", "job id shared by the nodes of one run")
    flag(where, "--collective-timeout-s", "launch.collective_timeout_s",
         "a collective waiting longer than this fails instead of hanging")
    flag(where, "--num-workers", "num_workers", "loader worker processes per rank")
    flag(where, "--threads", "threads", "torch threads per rank")

    lr = parser.add_argument_group("learning rate (peak = lr x scale(global batch / reference batch), printed at the start)")
    flag(lr, "--lr", "lr.base_lr", "base LR at the reference batch (default: the workload's)")
    flag(lr, "--lr-scaling", "lr.scaling", "how the peak LR follows the global batch (default: sqrt; none "
         "where the workload declares reference_batch = None)", choices=LR_SCALING_RULES)
    flag(lr, "--lr-reference-batch", "lr.reference_batch",
         "global batch the base LR was tuned at (default: the workload's reference_batch, 512 if it declares none)")
    flag(lr, "--warmup-steps", "lr.warmup_steps", "linear warm-up steps (default: 5%% of the run)")
    flag(lr, "--min-lr-ratio", "lr.min_lr_ratio", "final LR / peak LR of the cosine")

    output = parser.add_argument_group("output")
    flag(output, "--out", "out_dir", "run directory (metrics, checkpoints, summary)")
    flag(output, "--checkpoint-every", "checkpoint_every", "steps between checkpoints (0: end only)")
    flag(output, "--keep-checkpoints", "keep_checkpoints", "newest checkpoints kept (0: every one)")
    flag(output, "--resume", "resume", "continue from the run directory's latest checkpoint")
    flag(output, "--eval-every", "eval_every", "steps between validations (0: end only)")
    flag(output, "--eval-every-samples", "eval_every_samples",
         "samples between validations (runs at different batches validate at the same samples)")
    flag(output, "--eval-batches", "eval_batches", "cap on validation batches per rank")
    flag(output, "--log-every", "log_every", "steps per logged window")
    flag(output, "--timing-warmup-steps", "timing_warmup_steps", "steps left out of steady samples/s")
    flag(output, "--bench-jsonl", "bench_jsonl", "bench results to compute the IO efficiency against")
    flag(output, "--no-progress", "progress", "no progress bar")
    quality = parser.add_argument_group("time to target and gradient noise scale")
    flag(quality, "--until", "until", "quality goal, e.g. 'val/accuracy>=0.95' or 'val/loss<=0.3': record the "
         "first validation that meets it")
    flag(quality, "--stop-at-target", "stop_at_target", "stop (with a checkpoint) when --until is met")
    flag(quality, "--noise-scale", "noise_scale", "measure the gradient noise scale B_simple", choices=("on", "off"))
    flag(quality, "--noise-scale-micro-batches", "noise_scale_micro_batches",
         "one rank: split each backward into k slices to measure it unbiased (default: the previous step's gradient)")
    flag(quality, "--noise-scale-smoothing", "noise_scale_smoothing",
         "weight of the old value in the moving averages of |G|^2 and tr(Sigma)")
    parser.set_defaults(handler=run_train_command)
    return parser


def run_train_command(args: argparse.Namespace) -> int:
    from trainspeed.train.launch import launch

    return launch(config_from_flags(TrainConfig, args))
