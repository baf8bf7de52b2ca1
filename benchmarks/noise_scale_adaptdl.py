"""AdaptDL's GradientNoiseScale on the training recipe of one trainspeed run, beside the run's own.

    pip install adaptdl requests            # adaptdl imports requests; neither is trainspeed's
    PYTHONPATH=examples python benchmarks/noise_scale_adaptdl.py RUN --out adaptdl.jsonl

The run's train_config.json gives the recipe, which this trains again in this process: the
workload's networks built with the run's seed, the optimizer the workload builds, trainspeed's
learning-rate schedule of the run, the run's loader (same seed, batch and order), the same steps,
each step's batch in the run's `--noise-scale-micro-batches` k slices whose gradients accumulate
before one optimizer step. AdaptDL's `GradientNoiseScale` (the plain one: trainspeed measures the
raw gradient, before Adam's preconditioning) watches the backward passes, told of the
accumulation as AdaptDL's own data-parallel wrapper would tell it (`require_backward_grad_sync`
only on the last slice). The weights need not be the run's bit for bit; the recipe is.

Units and smoothing: `accum_scale` is the slice's samples, so `var_avg` is tr(Sigma) per sample
and `sqr_avg` is |G|^2, as trainspeed's rows give them. AdaptDL smooths per sample (0.999 to the
power of the samples of a step); its `_smoothing` is set so that one step weighs the old value by
the run's `--noise-scale-smoothing`, the moving average trainspeed's rows carry. Its noise scale is
var_avg / sqr_avg after the last step, beside the run's last noise-scale row (its moving averages)
and the summary's `noise_scale` (trainspeed's figure: the windows of the run's last quarter).

One row per run goes to `--out` (a row of the same run, step and network is replaced), written atomically.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import Mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.noise_scale_brute_force import SAMPLE_LOSSES, ratio, write_row  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.data.base import LoaderConfig  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import row_record  # noqa: E402
from trainspeed.train.config import TrainConfig  # noqa: E402
from trainspeed.train.lr_schedule import build_schedulers  # noqa: E402
from trainspeed.train.rows import RunSummary  # noqa: E402
from trainspeed.train.runs import read_run as read_train_run  # noqa: E402
from trainspeed.gradients.noise_scale import split_batch  # noqa: E402
from trainspeed.gradients.rows import NoiseScaleRecord  # noqa: E402
from trainspeed.workloads import get_workload  # noqa: E402
from trainspeed.workloads.base import setup_optimizers  # noqa: E402

BENCHMARK = "noise-scale-adaptdl"
"""The `benchmark` of this script's `measurement` rows."""


def gradient_noise_scale_class() -> Any:
    try:
        from adaptdl.torch.gradient_noise_scale import GradientNoiseScale
    except ImportError:
        print("noise_scale_adaptdl: AdaptDL is not installed: pip install adaptdl requests", file=sys.stderr)
        raise SystemExit(2) from None
    return GradientNoiseScale


def read_run(run: Path) -> tuple[TrainConfig, RunSummary, NoiseScaleRecord]:
    """The run's settings, its summary and its last noise-scale row."""
    if not run.is_dir():
        raise UsageError(f"{run}: no such run directory")
    for name in ("train_config.json", "summary.json", "metrics.jsonl"):
        if not (run / name).is_file():
            raise UsageError(f"{run}: no {name}; give a finished trainspeed train run directory")
    config = TrainConfig.from_json((run / "train_config.json").read_text(encoding="utf-8"), str(run / "train_config.json"))
    if config.world_size != 1 or config.noise_scale_micro_batches < 2 or config.steps is None or config.data is None:
        raise UsageError(f"{run}: replays one-rank runs on data with --steps and --noise-scale-micro-batches k > 1")
    read = read_train_run(run)
    if not read.noise_curve:
        raise UsageError(f"{run}: no noise-scale rows in metrics.jsonl")
    return config, read.summary, read.noise_curve[-1]


def train_with_adaptdl(config: TrainConfig) -> tuple[str, Any, float]:
    """Train the run's recipe with AdaptDL's estimator attached; (network, estimator, seconds)."""
    gradient_noise_scale = gradient_noise_scale_class()
    workload = get_workload(config.workload)
    loss = SAMPLE_LOSSES.get(workload.name)
    if loss is None:
        raise UsageError(f"{config.workload}: no loss for workload {workload.name!r} here (known: {', '.join(SAMPLE_LOSSES)})")
    torch.manual_seed(config.seed)
    trainable = workload.build(config.size, config.seed)
    (name,) = trainable.trained_network_names()
    network = trainable.networks[name].train()
    setup_optimizers(trainable, False)
    optimizer = trainable.optimizers[name]
    scheduler = build_schedulers(trainable.optimizers, config.lr, config.global_batch, config.steps)[name]
    k = config.noise_scale_micro_batches
    slice_samples = config.batch_size_per_device // k
    adp = Mock(require_backward_grad_sync=True)  # the one attribute GradientNoiseScale reads of it
    estimator = gradient_noise_scale(adp, optimizer, num_replicas=1, accum_scale=slice_samples)
    estimator._smoothing = config.noise_scale_smoothing ** (1.0 / (slice_samples * k))
    loader = workload.open_dataset(config.data, config.size, LoaderConfig(
        batch_size=config.batch_size_per_device, seed=config.seed, split="train", num_workers=0))
    # The random partition into slices the run's meter draws, from the same seed.
    partitions = torch.Generator().manual_seed(config.seed)
    started, step, epoch = time.perf_counter(), 0, 0
    while step < config.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            estimator.reset_accumulation()
            permutation = torch.randperm(next(iter(batch.values())).shape[0], generator=partitions)
            for index, part in enumerate(split_batch(batch, k, permutation)):
                adp.require_backward_grad_sync = index == k - 1
                loss(network, part).backward()
            # The summed slice gradients, as a mean: the step trainspeed's accumulation takes.
            for parameter in network.parameters():
                if parameter.grad is not None:
                    parameter.grad.div_(k)
            optimizer.step()
            scheduler.step()
            step += 1
            if step == config.steps:
                break
        epoch += 1
    return name, estimator, time.perf_counter() - started


def adaptdl_row(args: argparse.Namespace, argv: list[str], machine: Machine) -> dict[str, Any]:
    config, summary, last = read_run(args.run)
    torch.set_num_threads(config.threads or 1)
    network, estimator, seconds = train_with_adaptdl(config)
    sqr, var = estimator.sqr_avg(), estimator.var_avg()
    trainspeed_value = (summary.noise_scale or {}).get(network)
    values = {
        "workload": get_workload(config.workload).name,
        "workload_spec": config.workload, "size": config.size, "network": network, "run": str(args.run),
        "step": config.steps, "batch_size_per_device": config.batch_size_per_device,
        "micro_batches": config.noise_scale_micro_batches, "smoothing": config.noise_scale_smoothing,
        "adaptdl_sqr_avg": sqr, "adaptdl_var_avg": var, "adaptdl_noise_scale": var / sqr if sqr > 0 else None,
        "trainspeed_noise_scale": trainspeed_value,
        **{f"trainspeed_last_row_{key}": getattr(last, key) for key in ("step", "grad_sq_avg", "trace_sigma_avg", "b_simple_avg",
                                                               "grad_sq", "trace_sigma", "b_simple", "method")},
        "ratio_grad_sq": ratio(last.grad_sq_avg, sqr), "ratio_trace_sigma": ratio(last.trace_sigma_avg, var),
        "ratio_noise_scale_last_row": ratio(last.b_simple_avg, var / sqr if sqr > 0 else None),
        "ratio_noise_scale_summary": ratio(trainspeed_value, var / sqr if sqr > 0 else None),
        "adaptdl_version": importlib.metadata.version("adaptdl"), "seconds": seconds,
        "threads": torch.get_num_threads(), "torch_version": torch.__version__,
    }
    command = shlex.join(["python", "benchmarks/noise_scale_adaptdl.py", *argv])
    return row_record(MeasurementRow.of(BENCHMARK, values, command, machine.at_end()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a finished trainspeed train run directory")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file the row goes to")
    args = parser.parse_args(argv)
    gradient_noise_scale_class()
    machine = Machine.at_start()
    try:
        row = adaptdl_row(args, argv, machine)
    except UsageError as error:
        print(f"noise_scale_adaptdl: {error}", file=sys.stderr)
        return 2
    write_row(args.out, row)
    row = row["values"]
    print(f"{row['workload']} {row['size']}: AdaptDL |G|^2 {row['adaptdl_sqr_avg']:.4g} tr(Sigma) "
          f"{row['adaptdl_var_avg']:.4g} B {row['adaptdl_noise_scale']}; trainspeed last row "
          f"{row['trainspeed_last_row_b_simple_avg']}, summary {row['trainspeed_noise_scale']}")
    return 0




if __name__ == "__main__":
    sys.exit(main())
