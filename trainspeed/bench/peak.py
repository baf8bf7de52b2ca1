"""The device's peak matmul throughput, measured, so MFU is against this device's own ceiling.

A square matmul in the target's compute dtype is about the best case for any device; its
TFLOP/s is the denominator of MFU unless the user gives `--peak-tflops` (e.g. a datasheet value).
The matrix grows from 256 until one product is measurable, and the number of products per
timing is sized from one product, so a slow dtype (bf16 on a CPU without bf16 units) costs about
`budget_s`, not minutes.
"""

from __future__ import annotations

import time

import torch

from trainspeed.targets.base import Target

MAX_REPEATS = 20


def device_peak_tflops(target: Target) -> float:
    """The peak where the family measures it itself (a device that lives elsewhere measures on
    that device), else this probe on `target.device` from this process."""
    measured = target.measured_peak_tflops()
    return measured if measured is not None else measure_peak_tflops(target)


def measure_peak_tflops(target: Target, budget_s: float = 1.5) -> float:
    max_n = target.peak_probe_max_size
    n = 256
    while True:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(target.device, target.compute_dtype())
        b = torch.randn(n, n, generator=generator).to(target.device, target.compute_dtype())
        seconds_for = _product_timer(target, a, b)
        seconds_for(1)  # compile (XLA) and warm caches
        one_product_s = seconds_for(1)
        if n >= max_n or one_product_s >= budget_s / 20:
            break
        n *= 2
    repeats = max(1, min(MAX_REPEATS, int(budget_s / 3 / max(one_product_s, 1e-9))))
    seconds = min(seconds_for(repeats) for _ in range(3))
    return 2 * n**3 * repeats / seconds / 1e12


def _product_timer(target: Target, a: torch.Tensor, b: torch.Tensor):
    def seconds_for(repeats: int) -> float:
        target.sync()
        start = time.perf_counter()
        products = [a @ b for _ in range(repeats)]
        target.after_step()
        target.sync()
        del products
        return time.perf_counter() - start

    return seconds_for
