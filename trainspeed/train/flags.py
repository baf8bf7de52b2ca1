"""`trainspeed train`'s flag table, and a TrainConfig's own `trainspeed train` command from it.

The table lives with the config it sets, below every caller: the command line adds it to its
parser, and whoever launches a training (the studies, the plan's checks) builds a TrainConfig and
turns it into its command here, so a command a study runs or shows is always one train's own
parser reads back into that very config.
"""

from __future__ import annotations

from trainspeed.errors import UsageError
from trainspeed.flags import WORKLOAD_HELP, FlagGroup, OneLineParser, add_flags, config_argv, config_from_flags, flag
from trainspeed.train.config import AUTO_STEP_TIMES, LR_SCALING_RULES, RDZV_BACKENDS, TrainConfig

TRAIN_FLAGS = (
    FlagGroup("what to train", (
        flag("--workload", "workload", WORKLOAD_HELP, always=True),
        flag("--size", "size", "model size of the workload (default: the workload's default size); a library "
             "model takes PRESET[,key=value...], e.g. tiny,n_layer=4 (docs/workloads.md)"),
        flag("--data", "data", "the workload's data: a trainspeed shard set, or data read where it lies (an image "
             "folder, a token .bin/.npy, a Hugging Face dataset, WebDataset .tar shards; docs/workloads.md)"),
        flag("--bad-samples", "bad_samples", "a sample of --data that cannot be read (a corrupt image): refuse it "
             "(the run stops) or skip it (counted in the summary, warned about)", choices=("refuse", "skip")),
        flag("--synthetic-data", "synthetic_data", "no data IO: cycle synthetic batches"),
        flag("--target", "target", "device:mode:precision", always=True),
        flag("--exported", "exported", "train the steps `trainspeed export` wrote into this folder, where only JAX is "
             "(no torch is imported): one device, the exported batch sizes"),
    )),
    FlagGroup("how long", (
        flag("--steps", "steps", "optimizer steps"),
        flag("--epochs", "epochs", "passes over the training split (real data only)"),
        flag("--samples", "samples", "samples to train (the run ends at the first step at or past them)"),
        flag("--batch-size-per-device", "batch_size_per_device", "samples per device and step", always=True),
        flag("--seed", "seed", "seed of the model, the data order and every rank's random numbers"),
    )),
    FlagGroup("batch schedule (docs/batch_schedule.md)", (
        flag("--batch-schedule", "batch.schedule", "a global batch that grows: 64@0,128@20000,256@60000 (global "
             "batch @ samples trained), or auto (doubles while the noise scale says the next batch still scales); "
             "the run starts at its first batch, not --batch-size-per-device"),
        flag("--global-batch-min", "batch.global_batch_min", "auto: the global batch it starts at"),
        flag("--global-batch-max", "batch.global_batch_max", "auto: the largest global batch it doubles to"),
        flag("--critical-batch", "batch.critical_batch", "auto: critical-batch rows (a study's folder or a JSONL) "
             "that calibrate B_crit = c x B_simple (default: c = 1)"),
        flag("--auto-step-times", "batch.auto_step_times", "auto: run weighs the step times it measures in the run "
             "(the batch of least time to the same progress); off decides by the noise scale (and --bench-jsonl's "
             "step times) alone, so a run switches at the same steps every time", choices=AUTO_STEP_TIMES),
        flag("--max-batch-per-device", "batch.max_batch_per_device", "the most samples a device steps at once: a "
             "schedule goes past it in micro-batches, auto stops below it (also read from --bench-jsonl's "
             "out-of-memory rows)"),
    )),
    FlagGroup("where (torchrun)", (
        flag("--nproc", "launch.nproc", "processes (devices) per node", always=True),
        flag("--nnodes", "launch.nnodes", "nodes of the job"),
        flag("--node-rank", "launch.node_rank", "this node's rank (static rendezvous only)"),
        flag("--rdzv-backend", "launch.rdzv_backend", "how nodes meet", choices=RDZV_BACKENDS),
        flag("--rdzv-endpoint", "launch.rdzv_endpoint", "HOST:PORT reachable from every node"),
        flag("--rdzv-id", "launch.rdzv_id", "job id shared by the nodes of one run"),
        flag("--collective-timeout-s", "launch.collective_timeout_s",
             "a collective waiting longer than this fails instead of hanging"),
        flag("--num-workers", "num_workers", "loader worker processes per rank (per device where one process drives "
             "several: jax:* and xla:* with --nproc N)"),
        flag("--threads", "threads", "torch threads per rank"),
    )),
    FlagGroup("learning rate (peak = lr x scale(global batch / reference batch), printed at the start)", (
        flag("--lr", "lr.base_lr", "base LR at the reference batch (default: the workload's)"),
        flag("--lr-scaling", "lr.scaling", "how the peak LR follows the global batch (default: sqrt; none "
             "where the workload declares reference_batch = None)", choices=LR_SCALING_RULES),
        flag("--lr-reference-batch", "lr.reference_batch",
             "global batch the base LR was tuned at (default: the workload's reference_batch, 512 if it declares none)"),
        flag("--warmup-steps", "lr.warmup_steps", "linear warm-up steps (default: 5%% of the run)"),
        flag("--min-lr-ratio", "lr.min_lr_ratio", "final LR / peak LR of the cosine"),
    )),
    FlagGroup("output", (
        flag("--out", "out_dir", "run directory (metrics, checkpoints, summary)"),
        flag("--checkpoint-every", "checkpoint_every", "steps between checkpoints (0: end only)"),
        flag("--keep-checkpoints", "keep_checkpoints", "newest checkpoints kept (0: every one)"),
        flag("--resume", "resume", "continue from the run directory's latest checkpoint"),
        flag("--init-from", "init_from", "start from another run's checkpoint (its networks and optimizer states; "
             "this run's own batch, LR, seed and budget): RUN_DIR with --init-step S, or "
             "RUN_DIR/checkpoints/step-NNNNNNNNN.pt"),
        flag("--init-step", "init_step", "the step of --init-from RUN_DIR's checkpoint"),
        flag("--eval-every", "eval_every", "steps between validations (0: end only)"),
        flag("--eval-every-samples", "eval_every_samples",
             "samples between validations (runs at different batches validate at the same samples)"),
        flag("--eval-batches", "eval_batches", "cap on validation batches per rank"),
        flag("--log-every", "log_every", "steps per logged window"),
        flag("--timing-warmup-steps", "timing_warmup_steps", "steps left out of steady samples/s"),
        flag("--bench-jsonl", "bench_jsonl", "bench results to compute the IO efficiency against (with a "
             "--batch-schedule: the memory cap its out-of-memory rows show; with auto also the step time at each "
             "batch, by which it takes the batch of least time to the same progress)"),
        flag("--no-progress", "progress", "no progress bar"),
    )),
    FlagGroup("time to target and gradient noise scale", (
        flag("--until", "until", "quality goal, e.g. 'val/accuracy>=0.95' or 'val/loss<=0.3': record the "
             "first validation that meets it"),
        flag("--stop-at-target", "stop_at_target", "stop (with a checkpoint) when --until is met"),
        flag("--noise-scale", "noise_scale", "measure the gradient noise scale B_simple", choices=("on", "off")),
        flag("--noise-scale-micro-batches", "noise_scale_micro_batches",
             "one rank: split each backward into k slices to measure it unbiased (default: the previous step's gradient)"),
        flag("--noise-scale-every", "noise_scale_every",
             "one rank: measure one step in K, train the others plainly (1: every step; its cost: "
             "docs/results/noise_scale_cost.md)"),
        flag("--noise-scale-smoothing", "noise_scale_smoothing",
             "weight of the old value in the moving averages of |G|^2 and tr(Sigma)"),
    )),
)
"""Every flag of `trainspeed train`, grouped as `--help` shows them; defaults, types and ranges come
from TrainConfig's fields (`trainspeed.flags.add_flag`)."""


def train_command(config: TrainConfig) -> list[str]:
    """The `trainspeed train` arguments (`train` first) that run `config`: the values that differ
    from TrainConfig's defaults, and always the workload, target, devices and batch per device (the
    coordinates of a configuration), so the command says what it trains and where."""
    return ["train", *config_argv(config, TRAIN_FLAGS)]


def train_parser() -> OneLineParser:
    """A parser of train's flags alone, to read a command back: no `--help` (which would print and
    exit), so one in a command is an unknown flag like any other."""
    parser = OneLineParser(prog="trainspeed train", add_help=False)
    add_flags(parser, TrainConfig, TRAIN_FLAGS)
    return parser


def config_of_command(argv: list[str]) -> TrainConfig:
    """The TrainConfig a `trainspeed train` command (`train` first, as `train_command` writes it)
    runs, read by train's own flags; UsageError for flags train refuses."""
    if argv[:1] != ["train"]:
        raise UsageError(f"not a `trainspeed train` command: {' '.join(argv[:3])} ...")
    return config_from_flags(TrainConfig, train_parser().parse_args(argv[1:]))
