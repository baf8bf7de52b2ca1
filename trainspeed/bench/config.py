"""Typed configuration of a benchmark sweep, validated with messages that say how to fix it.

The command line builds its flags from these dataclasses, so this module imports no torch: `--help`
and the checks of a sweep's settings run before (and without) the device stack."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import (
    MAX_BATCH_POWER,
    MAX_BATCH_SIZE,
    THREADS,
    WINDOW_S,
    CommaList,
    comma_list,
    machine_cpus,
    ranged,
    ranged_as,
)

POWER_RANGE = re.compile(r"2\^(\d+)\.\.2\^(\d+)", re.ASCII)
POWER = re.compile(r"2\^(\d+)", re.ASCII)
FEEDS = ("device", "host", "data")
DATA_FEED = "data"
INTEGER = re.compile(r"-?\d+", re.ASCII)


def _too_large(size: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"batch size {size} is over the limit of 2^{MAX_BATCH_POWER}: at even one "
                                      "byte per sample such a batch needs a TiB, more than any device holds")


def _exponent(digits: str) -> int:
    """The k of 2^k, refused before 2^k is computed when it would exceed MAX_BATCH_SIZE."""
    if len(digits) > len(str(MAX_BATCH_POWER)) or int(digits) > MAX_BATCH_POWER:
        raise _too_large(f"2^{digits}")
    return int(digits)


def _batch_size(part: str) -> int:
    """One batch size of a list: a whole number or a power of two `2^k`, from 1 to MAX_BATCH_SIZE."""
    power = POWER.fullmatch(part)
    if power:
        return 2 ** _exponent(power.group(1))
    if not INTEGER.fullmatch(part):
        raise ValueError(part)
    if part.startswith("-") or not part.strip("0"):
        raise argparse.ArgumentTypeError(f"batch size {part} must be a positive integer")
    if len(part.lstrip("0")) > len(str(MAX_BATCH_SIZE)) or int(part) > MAX_BATCH_SIZE:
        raise _too_large(part)
    return int(part)


def _power_range(text: str) -> tuple[int, ...] | None:
    """`2^6..2^14`: every power of two in between (None: the text is no such range). Both ends are
    checked against MAX_BATCH_SIZE before a list is built, so `2^1..2^100000` is one error line,
    not a hundred thousand huge integers."""
    match = POWER_RANGE.fullmatch(text.replace(" ", ""))
    if match is None:
        return None
    low, high = (_exponent(digits) for digits in match.groups())
    if low > high:
        raise argparse.ArgumentTypeError("the range must go up, e.g. 2^6..2^14")
    return tuple(2**k for k in range(low, high + 1))


BATCH_SIZE_LIST = CommaList(_batch_size, f"batch sizes from 1 to 2^{MAX_BATCH_POWER} (64 or 2^6)",
                            "64,256,1024, or a range of powers of two such as 2^6..2^14", whole=_power_range, sort=True)
"""`--batch-sizes`: a range of powers of two (`2^6..2^14`) or a list (`64,256,1024`, `2^8,2^12`),
sorted, each size once."""
FEED_LIST = comma_list(choices=FEEDS, what="device (one batch kept on the device), host (each step copies a host "
                       "batch to the device) or data (each step's batch read from --data by a training rank's loader)",
                       example="device,host", distinct=True)
"""`--feed`: `device`, `host`, `data`, or several (each configuration then runs with each, back to back)."""
SYNTHETIC_FEED_LIST = comma_list(choices=FEEDS[:2], what="device (one batch kept on the device) or host (each step "
                                 "copies a host batch to the device)", example="device,host", distinct=True)
"""The studies' `--feed` (they bench synthetic batches, with no --data): `device`, `host`, or both."""
NOISE_SCALE_VARIANTS = ("off", "on")
NOISE_SCALE_LIST = comma_list(choices=NOISE_SCALE_VARIANTS, what="off or on (the one-rank gradient noise scale meter "
                              "of `trainspeed train`)", example="off,on", distinct=True)
"""`--noise-scale`: `off`, `on`, or both (each configuration then runs without and with, back to back)."""
TARGET_LIST = comma_list(what="targets (device:mode:precision)", example="cpu:eager:fp32,xla:lazy:fp32")
"""`--targets`: target names, each checked where it is looked up (`trainspeed.targets`)."""


@dataclass(frozen=True)
class TimingPlan:
    warmup_steps: int = 3
    windows: int = 5
    min_window_s: float = ranged_as(0.5, WINDOW_S)
    """Every timed window lasts at least this long (unless `max_steps_per_window` stops it)."""
    max_steps_per_window: int = 10_000
    """Cap on steps per window, so a step that is mostly a no-op cannot run for ever."""
    min_steps_per_window: int = 1
    """Steps every window holds at least. A pipelined target (a remote one with in-flight=N)
    overlaps a step's transfer with the step before it only inside a window, which ends synced,
    so a one-step window would time it as synchronous."""


@dataclass(frozen=True)
class BenchConfig:
    workload: str = "mahjong"
    size: str | None = None
    """None: the workload's default size (`trainspeed.workloads.resolve_size`)."""
    targets: list[str] = field(default_factory=lambda: ["cpu:eager:fp32", "cpu:compile:fp32", "xla:lazy:fp32"])
    batch_sizes: list[int] = field(default_factory=lambda: [2**k for k in range(6, 11)])
    out: Path = Path("results/bench.jsonl")
    baseline: str | None = None
    """The target ratios are taken to (None: the first)."""
    plan: TimingPlan = field(default_factory=TimingPlan)
    feeds: list[str] = field(default_factory=lambda: ["device"])
    """"device": one batch kept on the device; "host": each step copies a host batch to the device;
    "data": each step's batch is read from `data` by the loader a training rank opens (the
    workload's `open_dataset`) and copied to the device. With several, each (target, batch size)
    runs with each feed back to back, so they are compared side by side in one run's rows."""
    data: Path | None = None
    """What `--feed data` reads: any `--data` of `trainspeed train` (a shard set, or data read where
    it lies: an image folder, a token file, a Hugging Face dataset, tar shards)."""
    num_workers: int = ranged(1, 0, machine_cpus, why_high=" loader processes, more than this machine's CPUs")
    """Loader worker processes of `--feed data` (0: the bench's own process reads), as
    `trainspeed train --num-workers` sets them per rank."""
    bad_samples: str = "refuse"
    """A sample of `--data` that cannot be read: "refuse" or "skip" (counted in the rows), as in train."""
    noise_scale: list[str] = field(default_factory=lambda: ["off"])
    """"on": each step also measures the gradient noise scale as a one-rank `trainspeed train` does
    (`trainspeed.gradients.noise_scale`, previous-step method); with off,on both run back to back, so
    the meter's cost is a ratio of one run."""
    peak_tflops: float | None = ranged(None, 0, 1e6, low_open=True)
    """Peak for MFU; None: the chip's nominal peak where known (`nominal_peaks.py`), else the peak
    measured on the device (which rows keep beside a nominal one; a given peak measures none)."""
    threads: int | None = ranged_as(None, THREADS)
    """torch CPU threads (None leaves torch's default); recorded in every row."""
    seed: int = 0
    run_id: str | None = None
    """The rows' run id (None: a fresh one). Ratios pair only rows of one run, so commands measured
    as one comparison (trainspeed bench beside a reference peer) share one."""
    devices: int | None = ranged(None, 1, 1 << 16)
    """jax targets: each step over a data-parallel mesh of this many local devices (the batch split
    over them, the state copied to each: `train --nproc N`'s program); None: one device."""
    exported: Path | None = None
    """A folder of `trainspeed export`: time its programs on this machine's JAX device, with no
    torch (`trainspeed.exported.bench`); the target and workload are the folder's."""
    command: str | None = None
    """The command line, recorded in every row (no flag: the command sets it)."""

    def __post_init__(self) -> None:
        if not self.targets:
            raise UsageError("no targets given: pass --targets, e.g. cpu:eager:fp32,xla:lazy:fp32")
        if self.baseline is not None and self.baseline not in self.targets:
            raise UsageError(f"--baseline {self.baseline} is not among --targets {','.join(self.targets)}")
        if not self.batch_sizes or min(self.batch_sizes) <= 0 or max(self.batch_sizes) > MAX_BATCH_SIZE:
            raise UsageError(f"batch sizes must be positive integers up to 2^{MAX_BATCH_POWER}, "
                             "e.g. --batch-sizes 2^6..2^10")
        if self.peak_tflops is not None and not 0 < self.peak_tflops < math.inf:
            raise UsageError(f"--peak-tflops must be a positive number of TFLOP/s, got {self.peak_tflops}")
        if self.threads is not None and not 1 <= self.threads <= machine_cpus():
            raise UsageError(f"--threads must be between 1 and {machine_cpus()} (this machine's CPUs), got {self.threads}")
        if self.plan.windows < 1 or self.plan.warmup_steps < 0:
            raise UsageError("--windows must be >= 1 and --warmup-steps >= 0")
        variants = self.noise_scale
        if not variants or set(variants) - set(NOISE_SCALE_VARIANTS) or len(set(variants)) != len(variants):
            raise UsageError(f"bad noise-scale variants {','.join(variants)}: choose off, on or off,on")
        if not self.feeds or set(self.feeds) - set(FEEDS) or len(set(self.feeds)) != len(self.feeds):
            raise UsageError(f"bad feeds {','.join(self.feeds)}: choose device, host, data or several, e.g. device,host")
        if DATA_FEED in self.feeds and self.data is None:
            raise UsageError("--feed data reads each step's batch from --data: give --data PATH (a shard set, an "
                             "image folder, a token file, a Hugging Face dataset or tar shards)")
        if self.data is not None and DATA_FEED not in self.feeds:
            raise UsageError(f"--data {self.data} is read only by --feed data: add it (e.g. --feed device,data, the "
                             "step with and without its data) or drop --data")
        if self.devices is not None:
            uneven = [size for size in self.batch_sizes if size % self.devices]
            if uneven:
                raise UsageError(f"--devices {self.devices} must divide every batch size (each device takes an equal "
                                 f"slice); {','.join(map(str, uneven))} do not")
        if self.bad_samples not in ("refuse", "skip"):
            raise UsageError(f"--bad-samples {self.bad_samples}: choose refuse or skip")
        if self.plan.max_steps_per_window < 1:
            raise UsageError(f"--max-steps-per-window must be >= 1, got {self.plan.max_steps_per_window}")
        if not 1 <= self.plan.min_steps_per_window <= self.plan.max_steps_per_window:
            raise UsageError(f"--min-steps-per-window must be between 1 and --max-steps-per-window "
                             f"({self.plan.max_steps_per_window}), got {self.plan.min_steps_per_window}")
        if not 0 < self.plan.min_window_s < math.inf:
            raise UsageError(f"--min-window-s must be a positive number of seconds, got {self.plan.min_window_s}")
