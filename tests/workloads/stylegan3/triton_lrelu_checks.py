"""The fused Triton filtered leaky ReLU against the plain ops, run by Triton's interpreter on the CPU.

Run by `test_triton_lrelu.py` in a pytest process of its own with TRITON_INTERPRET=1 in its
environment: Triton reads the variable once, when it is imported, and every kernel then runs on
host tensors. The interpreter multiplies bf16 operands wrongly (the kernels multiply them as fp32
there: the same products) and truncates when it rounds fp32 to bf16 where a GPU rounds to
nearest, so the bf16 bounds here are looser than on a GPU; the fp32 checks are tight.
"""

from __future__ import annotations

import math
import os

import pytest
import torch

from trainspeed.workloads.stylegan3 import triton_lrelu
from trainspeed.workloads.stylegan3.filters import design_lowpass_filter
from trainspeed.workloads.stylegan3.ops import filtered_lrelu

if os.environ.get("TRITON_INTERPRET") != "1" or triton_lrelu.triton is None:
    pytest.skip("run by test_triton_lrelu.py with TRITON_INTERPRET=1 and triton installed", allow_module_level=True)

# run without the tests' conftest.py (it would start the XLA client, seconds this process never
# uses): the test session's threads, as the conftest sets them
torch.set_num_threads(int(os.environ.get("TRAINSPEED_TEST_THREADS", "2")))

# size_y, size_x, up, down, up taps, down taps, padding (x0, x1, y0, y1), channels: the T-256
# layer kinds (2x, 4x with a crop, the last layer's crop) at smaller sizes, and odd shapes
CASES = [
    (38, 38, 2, 2, 12, 12, (9, 8, 9, 8), 3),
    (22, 25, 4, 2, 24, 12, (-6, -9, -6, -9), 2),
    (30, 30, 2, 2, 12, 12, (-11, -12, -11, -12), 2),
    (17, 40, 2, 2, 12, 12, (9, 8, 7, 10), 2),
    (9, 11, 2, 4, 6, 16, (5, 4, 3, 6), 2),
]


def _filters(up, down, up_taps, down_taps):
    up_filter = design_lowpass_filter(up_taps, 2.0, 2.0, 8.0 * up)
    down_filter = design_lowpass_filter(down_taps, 2.0, 2.0, 8.0 * up)
    return up_filter, down_filter


def _both(case, dtype=torch.float32, clamp=0.9, seed=0, memory_format=torch.contiguous_format):
    """(fused output, plain output, fused grads, plain grads) for the same inputs and output gradient."""
    size_y, size_x, up, down, up_taps, down_taps, padding, channels = case
    up_filter, down_filter = _filters(up, down, up_taps, down_taps)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, channels, size_y, size_x, generator=generator).to(dtype).contiguous(memory_format=memory_format)
    bias = torch.randn(channels, generator=generator)
    outputs, grads = [], []
    for fused in (True, False):
        xi, bi = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
        if fused:
            y = triton_lrelu.filtered_lrelu(xi, bi, tuple(up_filter.tolist()), tuple(down_filter.tolist()),
                                            up, down, padding, math.sqrt(2), 0.2, clamp)  # fmt: skip
        else:
            y = filtered_lrelu(xi, up_filter, down_filter, bi, up, down, padding, gain=math.sqrt(2), slope=0.2, clamp=clamp)
        grad_y = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
        outputs.append(y)
        grads.append(torch.autograd.grad(y, (xi, bi), grad_y))
    return outputs[0], outputs[1], grads[0], grads[1]


def _relative_error(actual, expected) -> float:
    return float((actual.detach().float() - expected.detach().float()).norm() / expected.detach().float().norm())


@pytest.mark.parametrize("case", CASES)
def test_fused_matches_the_plain_ops_in_fp32(case):
    y, reference, (grad_x, grad_bias), (ref_x, ref_bias) = _both(case)
    assert y.shape == reference.shape
    torch.testing.assert_close(y, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_x, ref_x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_bias, ref_bias, rtol=1e-5, atol=1e-4)


def test_clamp_and_no_clamp():
    """The clamp is elementwise, the same in every layer kind: checked on the smallest case."""
    for clamp in (None, 0.05):
        y, reference, (grad_x, _), (ref_x, _) = _both(CASES[4], clamp=clamp, seed=4)
        torch.testing.assert_close(y, reference, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad_x, ref_x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES[:2])
def test_fused_stays_within_bf16_error(case):
    """bf16 in and out, fp32 sums: as close to the fp32 result as truncating bf16 allows."""
    y32, _, (grad32, _), _ = _both(case)
    y, plain, (grad_x, _), (plain_x, _) = _both(case, dtype=torch.bfloat16)
    assert y.dtype == grad_x.dtype == torch.bfloat16
    assert _relative_error(plain, y32) < 2**-6  # the plain ops in bf16, for scale
    assert _relative_error(y, y32) < 2**-4
    assert _relative_error(grad_x, grad32) < 2**-4


def test_channels_last_in_channels_last_out():
    y, reference, (grad_x, _), (ref_x, _) = _both(CASES[3], memory_format=torch.channels_last)
    assert y.is_contiguous(memory_format=torch.channels_last) and grad_x.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_x, ref_x, rtol=1e-5, atol=1e-5)


def test_the_sign_mask_is_two_bits_per_upsampled_pixel_and_only_kept_for_backward():
    size_y, size_x, up, down, up_taps, down_taps, padding, channels = CASES[0]
    up_filter, down_filter = _filters(up, down, up_taps, down_taps)
    x = torch.randn(2, channels, size_y, size_x)
    arguments = ([*up_filter.tolist()], [*down_filter.tolist()], up, down, list(padding), math.sqrt(2), 0.2, None)
    _, signs = triton_lrelu._fused_forward(x, torch.zeros(channels), *arguments, True)
    upsampled = size_y * up + padding[2] + padding[3] - up_taps + 1, size_x * up + padding[0] + padding[1] - up_taps + 1
    assert signs.dtype == torch.uint8 and signs.shape == (2 * channels, upsampled[0], -(-upsampled[1] // 4))
    _, signs = triton_lrelu._fused_forward(x, torch.zeros(channels), *arguments, False)
    assert signs.numel() == 0
    with torch.no_grad():  # no gradient will be asked for: no mask is written
        y = triton_lrelu.filtered_lrelu(x.requires_grad_(), torch.zeros(channels), *arguments[:2], up, down, padding,
                                        math.sqrt(2), 0.2, None)  # fmt: skip
    assert not y.requires_grad


def test_differentiating_twice_raises():
    """The backward is first-order: a double backward (as R1's, were it to pass through G) is an
    error, never a silently wrong gradient."""
    size_y, size_x, up, down, up_taps, down_taps, padding, channels = CASES[0]
    up_filter, down_filter = _filters(up, down, up_taps, down_taps)
    x = torch.randn(1, channels, size_y, size_x, requires_grad=True)
    y = triton_lrelu.filtered_lrelu(x, torch.zeros(channels), tuple(up_filter.tolist()), tuple(down_filter.tolist()),
                                    up, down, padding, math.sqrt(2), 0.2, None)  # fmt: skip
    (grad,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="filtered_lrelu_backward"):
        grad.square().sum().backward()


def test_torch_compile_keeps_it_as_one_op():
    size_y, size_x, up, down, up_taps, down_taps, padding, channels = CASES[1]
    up_filter, down_filter = _filters(up, down, up_taps, down_taps)
    taps = (tuple(up_filter.tolist()), tuple(down_filter.tolist()))

    def layer(x, bias):
        return triton_lrelu.filtered_lrelu(x, bias, *taps, up, down, padding, math.sqrt(2), 0.2, 1.0)

    x = torch.randn(2, channels, size_y, size_x, requires_grad=True)
    bias = torch.randn(channels, requires_grad=True)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    expected, actual = layer(x, bias), compiled(x, bias)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(torch.autograd.grad(actual.sum(), x)[0], torch.autograd.grad(expected.sum(), x)[0])


def _trainables():
    """tiny-t's layers (sizes, filters, up and down factors) with 4 channels: the interpreter runs
    one program at a time, tens of milliseconds each, so the networks must be narrow."""
    import dataclasses

    from trainspeed.workloads.stylegan3.configs import get_config
    from trainspeed.workloads.stylegan3.workload import build_trainable

    config = dataclasses.replace(get_config("tiny-t"), z_dim=16, w_dim=16, g_channel_base=128, g_channel_max=4,
                                 d_channel_base=256, d_channel_max=8)  # fmt: skip
    fused = build_trainable(dataclasses.replace(config, lrelu_kernel="triton"), seed=0).to(torch.device("cpu"))
    plain = build_trainable(config, seed=0).to(torch.device("cpu"))
    return fused, plain


@pytest.mark.slow
def test_the_generator_runs_the_fused_kernel_on_the_interpreter():
    fused, plain = _trainables()
    assert fused.lrelu_path == "triton" and plain.lrelu_path == "plain"
    calls = []
    original = triton_lrelu.filtered_lrelu
    triton_lrelu.filtered_lrelu = lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs)
    try:
        z = torch.randn(1, fused.config.z_dim, generator=torch.Generator().manual_seed(0))
        images = [trainable.networks["G"](z) for trainable in (fused, plain)]
    finally:
        triton_lrelu.filtered_lrelu = original
    layers = [layer for layer in fused.networks["G"].synthesis.layers if not layer.is_torgb]
    assert len(calls) == len(layers)
    torch.testing.assert_close(images[0], images[1], rtol=1e-4, atol=1e-5)
    grads = [torch.autograd.grad(image.square().sum(), trainable.networks["G"].synthesis.layers[0].weight)[0]
             for image, trainable in zip(images, (fused, plain))]  # fmt: skip
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_training_step_with_r1_matches_the_plain_ops():
    """G main, D main and R1 (step 0): R1 differentiates D twice and never G, so the fused
    generator trains beside the plain-op discriminator as the plain generator does."""
    fused, plain = _trainables()
    for trainable in (fused, plain):
        trainable.setup_optimizers()
    # one image: the interpreter runs a program per image, channel and tile, and the kernels' indexing
    # across images is checked by the cases above (two each)
    batch = {"images": torch.randint(0, 256, (1, 3, 32, 32), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)}
    losses = []
    for trainable in (fused, plain):
        torch.manual_seed(5)
        trainable.train_step(batch)
        losses.append({name: float(loss) for name, loss in trainable.last_losses.items()})
    assert set(losses[0]) == {"G", "D", "R1"}
    for name in losses[1]:
        assert losses[0][name] == pytest.approx(losses[1][name], rel=1e-4, abs=1e-6), name
    # G's gradients are G main's, taken at the initial weights; D's are R1's, after one D update
    # (Adam's first step moves each weight by about the learning rate times the gradient's sign,
    # so a gradient within rounding of zero may move a weight the other way: compared in norm)
    for (name, a), b in zip(fused.networks["G"].named_parameters(), plain.networks["G"].parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)
    pairs = list(zip(fused.networks["D"].parameters(), plain.networks["D"].parameters()))
    assert all((a.grad is None) == (b.grad is None) for a, b in pairs)  # R1 does not reach D's output bias
    fused_d = torch.cat([a.grad.flatten() for a, b in pairs if a.grad is not None])
    plain_d = torch.cat([b.grad.flatten() for a, b in pairs if b.grad is not None])
    assert _relative_error(fused_d, plain_d) < 1e-3
