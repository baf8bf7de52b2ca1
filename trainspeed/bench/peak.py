"""The device's peak matmul throughput, measured: this device's own ceiling, beside its nominal one.

A square matmul in the target's compute dtype is about the best case for any device. Every row
that measured it keeps its TFLOP/s (`measured_peak_tflops`) and the MFU against it
(`mfu_of_measured_peak`); it is MFU's denominator where the chip has no nominal peak
(`nominal_peaks.py`: any CPU) and the user gives no `--peak-tflops`.

What the probe runs, and why:
- a dependent chain `x = linear(x, w)`, not independent products of the same operands: a lazy
  compiler (XLA) merges identical products into one and would report many times the device's
  speed; each product of the chain needs the one before it, so none can be skipped or merged.
  `w` is orthogonal, so the chain neither grows nor vanishes in any dtype;
- the layout and dtype the model's matmuls run in: `linear` (the weight transposed, as every
  nn.Linear calls it) on operands already in the compute dtype, under the target's autocast, so
  the probe takes the kernel autocast picks for the model (on a CPU without fast bf16 kernels,
  PyTorch's fallback bf16 gemm is several times slower for `a @ b` than for `a @ b.T`) and pays
  no cast inside the timing;
- a synced start and end for every timing, the graph cut included.

The matrix grows from 256 until one product is measurable, the fastest size is kept, and the chain
length is sized from one product, so a slow dtype costs about `budget_s`, not minutes.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F

from trainspeed.bench.mfu import refused_peak  # noqa: F401 - where callers found it
from trainspeed.targets.base import Target

MAX_REPEATS = 20


def device_peak_tflops(target: Target) -> float:
    """The peak where the family measures it itself (a device that lives elsewhere measures on
    that device), else this probe on `target.device` from this process."""
    measured = target.measured_peak_tflops()
    return measured if measured is not None else measure_peak_tflops(target)


def measure_peak_tflops(target: Target, budget_s: float = 1.5) -> float:
    timers: dict[int, Callable[[int], float]] = {}
    product_s: dict[int, float] = {}
    n = 256
    while True:
        timers[n] = _chain_timer(target, n)
        timers[n](1)  # compile (XLA) and warm caches
        product_s[n] = timers[n](1)
        if n >= target.peak_probe_max_size or product_s[n] >= budget_s / 20:
            break
        n *= 2
    # The fastest size, not the largest: a gemm without cache blocking (PyTorch's fallback bf16
    # kernel) slows down once the matrices outgrow the caches.
    n = max(product_s, key=lambda size: size**3 / max(product_s[size], 1e-12))
    repeats = max(1, min(MAX_REPEATS, int(budget_s / 3 / max(product_s[n], 1e-9))))
    timers[n](repeats)  # a chain of another length is another graph to compile (XLA)
    seconds = min(timers[n](repeats) for _ in range(3))
    return 2 * n**3 * repeats / seconds / 1e12


def probe_operands(target: Target, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The chain's start value and its orthogonal weight, on the device in the compute dtype."""
    generator = torch.Generator().manual_seed(0)
    start_value = torch.randn(n, n, generator=generator)
    orthogonal, _ = torch.linalg.qr(torch.randn(n, n, generator=generator))
    x0 = start_value.to(target.device, target.compute_dtype())
    # LAPACK returns Q column-major; a weight is row-major, and the layout picks the kernel.
    w = orthogonal.contiguous().to(target.device, target.compute_dtype())
    return x0, w


def matmul_chain(x: torch.Tensor, w: torch.Tensor, repeats: int) -> torch.Tensor:
    """`repeats` dependent products `x = linear(x, w)`: each needs the one before it."""
    for _ in range(repeats):
        x = F.linear(x, w)
    return x


def _chain_timer(target: Target, n: int) -> Callable[[int], float]:
    """Seconds for a chain of `repeats` dependent n x n products on the device, synced at both ends."""
    x0, w = probe_operands(target, n)

    def seconds_for(repeats: int) -> float:
        target.sync()
        start = time.perf_counter()
        with target.autocast():
            x = matmul_chain(x0, w, repeats)
        target.after_step()
        target.sync()
        elapsed = time.perf_counter() - start
        del x
        return elapsed

    return seconds_for
