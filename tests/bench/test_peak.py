"""The peak probe measures what the device can do: no products a compiler can merge, and the
kernel the model's matmuls run under autocast."""

import time

import pytest
import torch
import torch.nn.functional as F

from trainspeed.bench.peak import measure_peak_tflops
from trainspeed.targets import available_targets, get_target


@pytest.mark.slow
@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_the_xla_probe_on_the_host_cpu_is_not_many_times_the_eager_probe():
    """XLA on the PJRT CPU client runs its matmuls on the same cores as eager PyTorch: a probe
    whose identical products the compiler merged reported 10x the eager figure."""
    eager = measure_peak_tflops(get_target("cpu:eager:fp32"), budget_s=0.6)
    xla = measure_peak_tflops(get_target("xla:lazy:fp32"), budget_s=0.6)
    assert 0 < xla <= 3 * eager, (xla, eager)


def _autocast_linear_tflops(n: int = 512, timings: int = 5) -> float:
    """How fast the model's own matmuls run: nn.Linear's layout, fp32 operands, bf16 autocast
    (the fastest of a few timings, as the probe keeps its fastest: other jobs only slow things)."""
    x, w = torch.randn(n, n), torch.randn(n, n) / n**0.5
    seconds = []
    with torch.autocast("cpu", dtype=torch.bfloat16):
        F.linear(x, w)
        for _ in range(timings):
            start = time.perf_counter()
            F.linear(x, w)
            seconds.append(time.perf_counter() - start)
    return 2 * n**3 / min(seconds) / 1e12


@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "fallback-gemm"])
def test_the_cpu_bf16_probe_is_not_slower_than_the_matmuls_autocast_runs(onednn):
    """Without oneDNN's bf16 kernels (an older CPU, or oneDNN off) PyTorch's fallback bf16 gemm
    runs `a @ b` several times slower than `linear`'s `a @ b.T`: a probe of the former reported a
    peak below what the model achieved (MFU above 300%)."""
    with torch.backends.mkldnn.flags(enabled=onednn):
        autocast_rate = _autocast_linear_tflops()
        peak = measure_peak_tflops(get_target("cpu:eager:bf16"), budget_s=0.6)
    assert peak >= 0.5 * autocast_rate, (peak, autocast_rate)
