"""A batch-size sweep over targets: each configuration is built fresh, timed, and written as a row.

Out-of-memory is a result, not a crash: the row says `oom`, memory is released, and the larger
batch sizes of that target are recorded as `skipped`. Rows are appended as they are measured, so
an interrupted sweep keeps what it measured.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import sys
import uuid
from typing import Callable

import torch

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.feed import DataFeedSource, Feed, check_data_feed, make_feed
from trainspeed.bench.flops import check_flops
from trainspeed.bench.mfu import Peaks, with_flops
from trainspeed.bench.peak import device_peak_tflops
from trainspeed.bench.results import (
    ResultRow,
    append_row,
    check_results_file,
    measured_row,
)
from trainspeed.bench.timing import time_training
from trainspeed.errors import DeviceLost, UsageError
from trainspeed.machine import Machine
from trainspeed.targets import Target, check_target_builds, get_target, target_family
from trainspeed.targets.threads import threads_kept
from trainspeed.workloads import get_workload, resolve_size
from trainspeed.workloads.base import Trainable, Workload
from trainspeed.workloads.identity import identify

ProgressHook = Callable[[str, int, bool], None]
"""Called with (target, batch size, finished) before and after each configuration."""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]


def measure_configuration(
    target: Target,
    workload: Workload,
    size: str,
    batch_size: int,
    plan: TimingPlan,
    seed: int,
    base: ResultRow,
    feed: str = "device",
    noise_scale: str = "off",
    data: DataFeedSource | None = None,
) -> ResultRow:
    """Build, feed and time one (target, batch size); an OOM becomes an `oom` row. The data feed
    reads `data` (its row records what it read)."""
    target.reset_compilation()
    target.free_memory()
    target.reset_peak_memory()
    base = dataclasses.replace(base, feed=feed)
    machine = base.machine or Machine.at_start()
    trainable = batches = None
    try:
        trainable = target.build(workload, size, seed)
        if noise_scale == "on":
            base = dataclasses.replace(base, noise_scale=attach_meter(trainable, target, batch_size))
        batches = make_feed(feed, target, workload, size, batch_size, seed, data)
        bytes_per_step = batches.bytes_per_step
        timing = time_training(target, trainable, batches.next_batch, plan)
        base = dataclasses.replace(base, **_data_fields(batches, data))
    except DeviceLost:
        raise  # the device is gone: no later configuration can run either
    except Exception as error:  # noqa: BLE001 - every failure becomes a row; OOM is told apart
        status = "oom" if target.is_oom(error) else "error"
        return dataclasses.replace(base, status=status, error=_first_line(error), machine=machine.at_end(),
                                   **target.row_fields())
    finally:
        del trainable, batches
        target.free_memory()
    return dataclasses.replace(
        measured_row(base, timing, min_window_s=plan.min_window_s, warmup_steps=plan.warmup_steps,
                     bytes_per_step=bytes_per_step, peak_memory_bytes=target.peak_memory_bytes()),
        machine=machine.at_end(), **target.row_fields(),
    )


def _data_fields(feed: Feed, data: DataFeedSource | None) -> dict:
    """What a data feed read, as the row's `data_*` fields ({} for a synthetic feed)."""
    if feed.kind != "data" or data is None:
        return {}
    from trainspeed.data.sources import detect_format

    record = feed.data_record() or {}
    return {"data": str(data.path), "data_format": record.get("format") or detect_format(data.path),
            "data_files": record.get("files"), "data_samples": record.get("samples"),
            "data_fingerprint": record.get("fingerprint"), "data_workers": data.num_workers,
            "data_skipped": record.get("skipped", 0)}


def attach_meter(trainable: Trainable, target: Target, batch_size: int) -> str | None:
    """Hook the one-rank noise-scale meter onto the trainable's optimizers; its method, or None
    where the gradients are not here to measure (a remote target)."""
    from trainspeed.gradients.noise_scale import NoiseScaleMeter

    if not target.gradients_here:
        return None
    meter = NoiseScaleMeter(trainable, world_size=1, samples_per_rank=batch_size, micro_batches=1, smoothing=0.99)
    meter.attach("single", {})
    return meter.method


def _targets_on_devices(names: list[str], devices: int | None) -> list[Target]:
    """The targets, built; with `devices` N, each stepping over a data-parallel mesh of N local
    devices, which JAX is asked for before it starts (only the jax family runs one program over a
    mesh in a bench)."""
    if devices is None:
        return [get_target(name) for name in names]
    from trainspeed.targets.jaxjit import JaxTarget

    meshless = [name for name in names if not issubclass(target_family(name), JaxTarget)]
    if meshless:
        raise UsageError(f"--devices {devices}: {meshless[0]} does not step over a mesh of devices in a bench; give "
                         "jax targets only (jax:jit:fp32, jax:jit:bf16), or drop --devices")
    JaxTarget.start_spmd(devices, asked_by="bench: --devices")
    targets = [get_target(name) for name in names]
    for target in targets:
        target.spmd_placer(devices, asked_by="bench: --devices")  # type: ignore[call-arg]
    return targets


@threads_kept()  # --threads is this sweep's: a bench run from Python leaves its caller's count as it was
def run_sweep(config: BenchConfig, on_progress: ProgressHook | None = None) -> list[ResultRow]:
    check_results_file(config.out)
    if config.threads:
        torch.set_num_threads(config.threads)
    workload = get_workload(config.workload)
    config = dataclasses.replace(config, size=resolve_size(workload, config.size))
    data = None
    if config.data is not None:  # data the workload cannot read is refused before anything is built or measured
        data = DataFeedSource(config.data, config.num_workers, config.bad_samples)
        check_data_feed(data, workload, config.size, config.batch_sizes, config.seed)
    # Build every target first: a bad or unavailable one fails before any time is spent, and
    # XLA registers its device before the first backward in this process (autograd sizes its
    # device queues then; a workload may count its FLOPs with a backward pass, and so does the
    # FLOPs check).
    targets = _targets_on_devices(config.targets, config.devices)
    for name in config.targets:
        check_target_builds(name, workload, config.devices or 1)
    flops = check_flops(workload, config.size, config.seed)
    warning = flops.warning()
    if warning:
        print(f"trainspeed: warning: {warning}", file=sys.stderr, flush=True)
    flops_per_sample = flops.declared
    identity = identify(workload)
    run_id = config.run_id or uuid.uuid4().hex[:12]
    rows: list[ResultRow] = []
    compiled = 0  # configurations of compiling targets measured so far in this process
    for target in targets:
        peaks = Peaks(given=config.peak_tflops) if config.peak_tflops else Peaks(nominal=target.nominal_peak())
        out_of_memory_at: dict[tuple[str, str], int] = {}  # per variant: the batch that ran out; larger ones are skipped
        for batch_size in config.batch_sizes:
            for feed, noise_scale in itertools.product(config.feeds, config.noise_scale):
                variant = (feed, noise_scale)
                if on_progress:
                    on_progress(str(target), batch_size, False)
                base = ResultRow(
                    run_id=run_id,
                    timestamp=_now(),
                    workload=workload.name,
                    size=config.size,
                    target=str(target),
                    batch_size=batch_size,
                    status="skipped",
                    feed=feed,
                    flops_per_sample=flops_per_sample,
                    **flops.row_fields(),
                    device_name=target.device_name(),
                    devices=config.devices,
                    **identity.provenance(config.command, Machine.at_start()).fields_of(ResultRow),
                )
                if variant in out_of_memory_at:
                    row = dataclasses.replace(base, error=f"batch {out_of_memory_at[variant]} already ran out of memory")
                else:
                    if target.fixed_shapes:
                        base = dataclasses.replace(base, compiles_before=compiled)
                        compiled += 1
                    row = measure_configuration(
                        target, workload, config.size, batch_size, config.plan, config.seed, base, feed, noise_scale,
                        data if feed == "data" else None,
                    )
                    if row.status == "oom":
                        out_of_memory_at[variant] = batch_size
                    if row.is_measured and peaks.wants_measured:
                        peaks = dataclasses.replace(peaks, measured=device_peak_tflops(target))
                    row = with_flops(row, flops_per_sample, peaks, config.devices or 1)
                append_row(config.out, row)
                rows.append(row)
                if on_progress:
                    on_progress(str(target), batch_size, True)
    return rows
