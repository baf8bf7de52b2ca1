"""The peak probe measures what the device can do: products no compiler can merge, in the kernel
the model's matmuls run under autocast. Checked by what the probe builds and dispatches, not by
timing it (timings on a shared machine say little)."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainspeed.bench.peak import matmul_chain, probe_operands, refused_peak
from trainspeed.targets import available_targets, get_target

MATMULS = {torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm, torch.ops.aten.matmul}


class MatmulCalls(TorchDispatchMode):
    """The matmul kernels dispatched, with the dtype and strides of their operands."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in MATMULS:
            operands = tuple((a.dtype, a.stride()) for a in args if isinstance(a, torch.Tensor))
            self.calls.append((str(func.overloadpacket), operands))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", ["cpu:eager:bf16", "cpu:eager:fp32"])
def test_the_cpu_probe_dispatches_the_kernel_a_models_linear_runs_under_autocast(name):
    """PyTorch's fallback bf16 gemm runs `a @ b` several times slower than `linear`'s `a @ b.T`: a
    probe of the former reported a peak below what the model achieved (MFU above 300%)."""
    target = get_target(name)
    x0, w = probe_operands(target, 64)
    with MatmulCalls() as probe, target.autocast():
        matmul_chain(x0, w, 3)
    layer = torch.nn.Linear(64, 64, bias=False)
    with MatmulCalls() as model, target.autocast():
        layer(torch.randn(64, 64))
    assert len(probe.calls) == 3 and len(model.calls) == 1
    assert set(probe.calls) == set(model.calls), (probe.calls, model.calls)
    assert model.calls[0][1][0][0] == target.compute_dtype()


@pytest.mark.parametrize("name", ["cpu:eager:bf16", "cpu:eager:fp32"])
def test_the_chain_neither_grows_nor_vanishes(name):
    target = get_target(name)
    x0, w = probe_operands(target, 128)
    with target.autocast():
        x = matmul_chain(x0, w, 20)
    ratio = (x.float().norm() / x0.float().norm()).item()
    assert 0.9 < ratio < 1.1, ratio


@pytest.mark.skipif(available_targets()["xla:lazy:fp32"] is not None, reason="torch_xla not installed")
def test_the_xla_probe_graph_holds_one_dot_per_product():
    """A lazy compiler merges identical products of the same operands into one (a probe built so
    reported 10x the eager rate on the same cores); a chain's graph keeps every product."""
    import torch_xla

    target = get_target("xla:lazy:fp32")
    x0, w = probe_operands(target, 64)
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([matmul_chain(x0, w, 7)])
    assert hlo.count(" dot(") == 7, hlo


def test_a_peak_below_the_achieved_rate_is_refused():
    assert refused_peak(0.5, 1.0, "measured") is None
    assert refused_peak(0.35, 0.1, "measured") == "measured peak 0.1 TFLOP/s below achieved 0.35 TFLOP/s"
