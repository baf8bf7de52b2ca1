"""The device's peak matmul throughput, measured, so MFU is against this device's own ceiling.

A square matmul in the target's compute dtype is about the best case for any device; its
TFLOP/s is the denominator of MFU unless the user gives `--peak-tflops` (e.g. a datasheet value).
"""

from __future__ import annotations

import time

import torch

from trainspeed.targets.base import Target

MATMUL_SIZE = {"cpu": 1024, "cuda": 8192, "xla": 1024}


def measure_peak_tflops(target: Target, repeats: int = 10) -> float:
    n = MATMUL_SIZE.get(target.device_type, 2048)
    dtype = target.compute_dtype()
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(target.device, dtype)
    b = torch.randn(n, n, generator=generator).to(target.device, dtype)

    def run() -> float:
        target.sync()
        start = time.perf_counter()
        products = [a @ b for _ in range(repeats)]
        target.after_step()
        target.sync()
        del products
        return time.perf_counter() - start

    run()  # compile (XLA) and warm caches
    seconds = min(run() for _ in range(3))
    return 2 * n**3 * repeats / seconds / 1e12
