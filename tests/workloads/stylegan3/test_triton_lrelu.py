"""The fused Triton filtered leaky ReLU: its tiling (checked here in plain PyTorch, no Triton
needed), where it runs, and its kernels against the plain ops under Triton's interpreter (in a
process of its own, see triton_lrelu_checks.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from child_commands import run_child

from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.layout import synthesis_layers
from trainspeed.workloads.stylegan3.ops import resampling_matrix
from trainspeed.workloads.stylegan3.triton_lrelu import (
    SIGNS_PER_BYTE,
    axis_matrices,
    plan_axes,
)
from trainspeed.workloads.stylegan3.workload import build_trainable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TRITON_MISSING = importlib.util.find_spec("triton") is None

# (size, up, down, up taps, down taps, pad before, pad after): every T-256 layer kind, and odd ones
AXES = [
    (38, 2, 2, 12, 12, 9, 8),
    (38, 4, 2, 24, 12, -6, -9),
    (150, 4, 2, 24, 12, -6, -9),
    (278, 2, 2, 12, 12, -11, -12),
    (17, 2, 2, 12, 12, 7, 10),
    (9, 2, 4, 6, 16, 5, 4),
    (5, 1, 1, 1, 1, 0, 0),
]


def _tiled_forward(x: torch.Tensor, plan, matrices) -> tuple[torch.Tensor, torch.Tensor]:
    """What the forward kernel does along one axis, tile by tile: (output, how often each
    upsampled position's sign is stored)."""
    out = torch.zeros(plan.out, dtype=x.dtype)
    stored = torch.zeros(plan.mid, dtype=torch.int64)
    for tile in range(plan.tiles):
        start = plan.x_origin + tile * plan.x_step
        index = torch.arange(start, start + plan.x_block)
        segment = torch.where((index >= 0) & (index < plan.size), x[index.clamp(0, plan.size - 1)], torch.zeros(()))
        y = matrices["down"] @ (matrices["up"] @ segment)
        first = tile * plan.out_tile
        count = min(plan.out_tile, plan.out - first)
        out[first : first + count] = y[:count]
        owned = plan.mid_block if tile == plan.tiles - 1 else plan.out_tile * plan.down
        mid_first = tile * plan.out_tile * plan.down
        stored[mid_first : min(mid_first + owned, plan.mid)] += 1
    return out, stored


def _tiled_backward(grad_y: torch.Tensor, plan, matrices) -> torch.Tensor:
    grad_x = torch.zeros(plan.size, dtype=grad_y.dtype)
    for tile in range(plan.b_tiles):
        start = plan.b_out_origin + tile * plan.in_tile * plan.up // plan.down
        index = torch.arange(start, start + plan.b_out_block)
        segment = torch.where((index >= 0) & (index < plan.out), grad_y[index.clamp(0, plan.out - 1)], torch.zeros(()))
        grad_mid = matrices["b_down"] @ segment
        mid_index = plan.b_mid_origin + tile * plan.in_tile * plan.up + torch.arange(plan.b_mid_block)
        grad_mid = torch.where((mid_index >= 0) & (mid_index < plan.mid), grad_mid, torch.zeros(()))
        g = matrices["b_up"] @ grad_mid
        first = tile * plan.in_tile
        count = min(plan.in_tile, plan.size - first)
        grad_x[first : first + count] = g[:count]
    return grad_x


@pytest.mark.parametrize("size,up,down,up_taps,down_taps,pad_before,pad_after", AXES)
def test_tiles_compute_the_whole_axis(size, up, down, up_taps, down_taps, pad_before, pad_after):
    """The banded tile matrices, applied tile by tile as the kernels do, give the same result as
    the whole-axis resampling matrices of the plain ops, forward and backward, and every
    upsampled position's sign is stored by exactly one tile."""
    generator = torch.Generator().manual_seed(size + up)
    up_filter = torch.rand(up_taps, generator=generator, dtype=torch.float64)
    down_filter = torch.rand(down_taps, generator=generator, dtype=torch.float64)
    plan, _ = plan_axes(size, size, up, down, up_taps, down_taps, (pad_before, pad_after, pad_before, pad_after))
    matrices = axis_matrices(plan, tuple(up_filter.tolist()), tuple(down_filter.tolist()))
    whole_up = resampling_matrix(size, up_filter * up, up, 1, pad_before, pad_after)
    whole_down = resampling_matrix(whole_up.shape[0], down_filter, 1, down, 0, 0)
    assert (plan.mid, plan.out) == (whole_up.shape[0], whole_down.shape[0])

    x = torch.randn(size, generator=generator, dtype=torch.float64)
    y, stored = _tiled_forward(x, plan, matrices)
    torch.testing.assert_close(y, whole_down @ whole_up @ x, rtol=1e-12, atol=1e-12)
    assert torch.equal(stored, torch.ones_like(stored))

    grad_y = torch.randn(plan.out, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(_tiled_backward(grad_y, plan, matrices), whole_up.t() @ whole_down.t() @ grad_y,
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    # the sign mask packs whole bytes per tile along x
    assert (plan.out_tile * plan.down) % SIGNS_PER_BYTE == 0 or plan.tiles == 1


@pytest.mark.parametrize("size", ["t256", "t1024"])
def test_every_layer_of_the_t_configs_has_a_plan(size):
    """Each layer's tiles cover its output, and its sign mask is 2 bits per upsampled pixel."""
    config = dataclasses.replace(get_config(size), lrelu_kernel="triton")
    trainable = build_trainable(config)
    for layer, spec in zip(trainable.networks["G"].synthesis.layers, synthesis_layers(config)):
        if layer.is_torgb:
            continue
        assert layer.up_filter.ndim == 1 and layer.down_filter.ndim == 1
        side = spec.before.size + layer.conv_kernel - 1
        plan_y, plan_x = plan_axes(side, side, layer.up, layer.down, len(layer.up_taps), len(layer.down_taps), layer.padding)
        assert plan_y.out == plan_x.out == spec.after.size
        assert plan_y.tiles * plan_y.out_tile >= plan_y.out and plan_y.b_tiles * plan_y.in_tile >= side


def test_without_cuda_the_plain_ops_run_and_say_why():
    """Asked for the Triton kernel on a host without CUDA (and without the interpreter), every
    layer runs the plain ops and the trainable reports the plain path and the reason."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("TRITON_INTERPRET=1 runs the kernels on the host")
    config = dataclasses.replace(get_config("tiny-t"), lrelu_kernel="triton")
    trainable = build_trainable(config).to(torch.device("cpu"))
    assert trainable.lrelu_path == "plain"
    notes = {layer.lrelu_note for layer in trainable.networks["G"].synthesis.layers if not layer.is_torgb}
    assert notes in ({"triton is not installed"}, {"the Triton kernels run on CUDA devices (this is cpu)"})
    assert build_trainable(get_config("tiny-t")).to(torch.device("cpu")).lrelu_path == "plain"


def test_radial_filters_use_the_plain_ops():
    if TRITON_MISSING:
        pytest.skip("triton is not installed: the fused filtered leaky ReLU is never chosen here")
    from trainspeed.workloads.stylegan3 import triton_lrelu

    radial = torch.ones(4, 4)
    assert "separable" in triton_lrelu.unavailable_reason(torch.device("cuda"), torch.ones(4), radial)
    assert triton_lrelu.unavailable_reason(torch.device("cuda"), torch.ones(4), None) is None


def _hopper_resource_usage(kernel, dtype: str, constants: dict) -> tuple[int, int]:
    """Compile a kernel for sm_90 without a GPU (Triton ships ptxas); (registers, stack bytes)."""
    import re
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name] = "*u8" if name == "signs_ptr" else f"*{dtype}"
        else:
            signature[name] = "fp32" if name in ("gain", "slope", "clamp") else "i32"
    source = ASTSource(fn=kernel, signature=signature,
                       constexprs={(kernel.arg_names.index(k),): v for k, v in constants.items()})  # fmt: skip
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        usage = run_child([str(tool), "--dump-resource-usage", cubin.name], timeout=120).stdout
    found = re.search(r"REG:(\d+).*?STACK:(\d+)", usage)
    return int(found.group(1)), int(found.group(2))


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("side,up,up_taps,padding", [(38, 2, 12, (9, 8, 9, 8)), (150, 4, 24, (-6, -9, -6, -9))])
def test_the_bf16_kernels_compile_for_hopper_without_spilling(side, up, up_taps, padding):
    """Triton lowers the kernels for an H100/H200 (sm_90) here, without a GPU: bf16 forward and
    backward of the T-256 layer kinds fit in registers (no stack) at 4 warps."""
    if TRITON_MISSING or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs triton compiling for real (not its interpreter)")
    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump").is_file():
        pytest.skip("this triton has no NVIDIA backend tools (ptxas, cuobjdump)")
    from trainspeed.workloads.stylegan3 import triton_lrelu

    plan_y, plan_x = plan_axes(side, side, up, 2, up_taps, 12, padding)
    forward = dict(HAS_CLAMP=True, WRITE_SIGNS=True, PRECISION="tf32", UPCAST=False,
                   BXY=plan_y.x_block, BUY=plan_y.mid_block, BOY=plan_y.out_block,
                   BXX=plan_x.x_block, BUX=plan_x.mid_block, BOX=plan_x.out_block)  # fmt: skip
    backward = dict(PRECISION="tf32", UPCAST=False, BXY=plan_y.b_in_block, BUY=plan_y.b_mid_block,
                    BOY=plan_y.b_out_block, BXX=plan_x.b_in_block, BUX=plan_x.b_mid_block, BOX=plan_x.b_out_block)  # fmt: skip
    for kernel, constants in ((triton_lrelu._forward_kernel, forward), (triton_lrelu._backward_kernel, backward)):
        registers, stack = _hopper_resource_usage(kernel, "bf16", constants)
        assert registers <= 255 and stack == 0, (kernel.__name__, registers, stack)


@pytest.mark.e2e
@pytest.mark.slow
def test_the_kernels_and_a_fused_training_step_with_r1_match_the_plain_ops_under_the_interpreter():
    """Every check of triton_lrelu_checks.py in one process of its own: triton reads TRITON_INTERPRET
    at import, so the interpreter needs a fresh process (without the tests' conftest.py, whose XLA
    client it never uses)."""
    if TRITON_MISSING:
        pytest.skip("triton is not installed: the fused filtered leaky ReLU's kernels cannot be checked here")
    environment = {**os.environ, "TRITON_INTERPRET": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
               str(HERE / "triton_lrelu_checks.py")]
    result = run_child(command, env=environment, timeout=1200)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " skipped" not in result.stdout, result.stdout[-3000:]
