"""`trainspeed bench`'s flag table, and a BenchConfig's own `trainspeed bench` command from it.

The table lives with the config it sets, below every caller: the command line adds it to its
parser, and whoever launches a bench (the plan's measurements) builds a BenchConfig and turns it
into its command here, so a command it runs or shows is always one bench's own parser reads back
into that very config (as `trainspeed.train.flags` does for `trainspeed train`).
"""

from __future__ import annotations

from trainspeed.bench.config import BATCH_SIZE_LIST, FEED_LIST, NOISE_SCALE_LIST, TARGET_LIST, BenchConfig
from trainspeed.errors import UsageError
from trainspeed.flags import (
    WORKLOAD_HELP,
    FlagGroup,
    OneLineParser,
    add_flags,
    config_argv,
    config_from_flags,
    flag,
    thread_count,
)

BENCH_FLAGS = (
    FlagGroup("what to measure", (
        flag("--workload", "workload", WORKLOAD_HELP, always=True),
        flag("--size", "size", "workload size (default: the workload's default size, mahjong tiny); a library model "
             "takes PRESET[,key=value...], e.g. tiny,res=96 (docs/workloads.md)"),
        flag("--targets", "targets", "comma list of device:mode:precision", always=True, type=TARGET_LIST),
        flag("--batch-sizes", "batch_sizes", "range 2^6..2^14 or list 64,256,1024 (each at most 2^40)", always=True,
             type=BATCH_SIZE_LIST),
        flag("--baseline", "baseline", "target the ratios are taken to (default: the first)"),
        flag("--feed", "feeds", "device: one batch kept on the device; host: each step copies a host batch to the "
             "device; data: each step's batch read from --data by a training rank's loader; several (device,data): "
             "each, back to back for each target and batch size", type=FEED_LIST),
        flag("--data", "data", "what --feed data reads: the data of `trainspeed train --data` (a shard set, an image "
             "folder, a token .bin/.npy, a Hugging Face dataset, WebDataset .tar shards; docs/data_in_place.md)"),
        flag("--num-workers", "num_workers", "loader worker processes of --feed data (0: the bench's process reads)"),
        flag("--bad-samples", "bad_samples", "a sample of --data that cannot be read: refuse it, or skip it "
             "(counted in the rows)", choices=("refuse", "skip")),
        flag("--devices", "devices", "jax targets: each step over a data-parallel mesh of N local devices, the batch "
             "split over them (`train --nproc N`'s program; on a CPU, N of JAX's host devices); rows give TFLOP/s "
             "and MFU per device"),
        flag("--exported", "exported", "a folder of `trainspeed export`: time its steps on this machine's JAX device "
             "(TPU, or JAX's CPU), with JAX and numpy alone (no torch); its target, workload and batch sizes"),
        flag("--noise-scale", "noise_scale", "on: each step also measures the gradient noise scale as one rank of "
             "`trainspeed train` does; off,on: both, back to back, to read the meter's cost as a ratio",
             type=NOISE_SCALE_LIST),
    )),
    FlagGroup("timing", (
        flag("--warmup-steps", "plan.warmup_steps", "untimed steps after the first"),
        flag("--windows", "plan.windows", "timed windows; the median is reported"),
        flag("--min-window-s", "plan.min_window_s", "seconds each window lasts at least"),
        flag("--min-steps-per-window", "plan.min_steps_per_window",
             "steps every window holds at least (a pipelined remote target overlaps steps only inside a window)"),
        flag("--max-steps-per-window", "plan.max_steps_per_window",
             "cap on steps per window (a row says steps_capped when it left a window short)"),
    )),
    FlagGroup("output and machine", (
        flag("--out", "out", "JSONL file rows are appended to", always=True),
        flag("--peak-tflops", "peak_tflops", "peak for MFU (default: the chip's nominal peak in the target's "
             "precision where known, e.g. 197 on a TPU v5e in bf16, docs/targets.md; else the matmul peak measured "
             "on the device)"),
        flag("--threads", "threads", "torch CPU threads (recorded in every row)", type=thread_count),
        flag("--seed", "seed", "seed of the model and the synthetic batch"),
        flag("--run-id", "run_id", "the rows' run id (default: a fresh one); ratios pair only rows of one run, so give "
             "commands measured as one comparison the same id"),
    )),
)
"""Every flag of `trainspeed bench` that sets its config, grouped as `--help` shows them; defaults,
types and ranges come from BenchConfig's fields (`trainspeed.flags.add_flag`)."""


def bench_command(config: BenchConfig, *, plot: bool = False, progress: bool = False) -> list[str]:
    """The `trainspeed bench` arguments (`bench` first) that run `config`: the values that differ
    from BenchConfig's defaults, and always the workload, targets, batch sizes and output (what it
    measures and where it writes); without a plot or a progress bar unless asked."""
    return ["bench", *config_argv(config, BENCH_FLAGS), *([] if plot else ["--no-plot"]),
            *([] if progress else ["--no-progress"])]


def bench_parser() -> OneLineParser:
    """A parser of bench's config flags alone, to read a command back (no `--help`)."""
    parser = OneLineParser(prog="trainspeed bench", add_help=False)
    add_flags(parser, BenchConfig, BENCH_FLAGS)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def config_of_command(argv: list[str]) -> BenchConfig:
    """The BenchConfig a `trainspeed bench` command (`bench` first, as `bench_command` writes it)
    measures, read by bench's own flags; UsageError for flags bench refuses."""
    if argv[:1] != ["bench"]:
        raise UsageError(f"not a `trainspeed bench` command: {' '.join(argv[:3])} ...")
    return config_from_flags(BenchConfig, bench_parser().parse_args(argv[1:]))
