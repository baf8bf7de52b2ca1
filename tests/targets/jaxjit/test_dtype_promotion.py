"""A traced step computes in the dtypes PyTorch gives: a Python number or a 0-dim tensor beside a
tensor with dimensions does not change its floating dtype. (torchax's own lowerings of add, sub,
mul and div made `bf16 * 2.0` fp32, which under autocast ran StyleGAN3's activations and filters
in fp32.)"""

from __future__ import annotations

import pytest
import torch
from toy_workload import ToyWorkload

from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

EXPRESSIONS = {
    "bf16 * 2.0": lambda t, s: t["bf16"] * 2.0,
    "2.0 * bf16": lambda t, s: 2.0 * t["bf16"],
    "bf16 + 0.5": lambda t, s: t["bf16"] + 0.5,
    "bf16 - 0.5": lambda t, s: t["bf16"] - 0.5,
    "bf16 / 3.0": lambda t, s: t["bf16"] / 3.0,
    "bf16 // 3.0": lambda t, s: torch.div(t["bf16"], 3.0, rounding_mode="floor"),
    "bf16 * 0-dim fp32": lambda t, s: t["bf16"] * s["fp32"],
    "0-dim fp32 + bf16": lambda t, s: s["fp32"] + t["bf16"],
    "fp32 * 0-dim bf16": lambda t, s: t["fp32"] * s["bf16"],
    "bf16 * fp32": lambda t, s: t["bf16"] * t["fp32"],
    "int * 2.5": lambda t, s: t["int"] * 2.5,
    "int + 1": lambda t, s: t["int"] + 1,
    "0-dim bf16 * 2.0": lambda t, s: s["bf16"] * 2.0,
}


def _operands(convert) -> tuple[dict, dict]:
    tensors = {"bf16": torch.ones(2, 3, dtype=torch.bfloat16), "fp32": torch.ones(2, 3), "int": torch.ones(2, 3, dtype=torch.int32)}
    scalars = {"bf16": torch.tensor(2.0, dtype=torch.bfloat16), "fp32": torch.tensor(2.0)}
    return {k: convert(v) for k, v in tensors.items()}, {k: convert(v) for k, v in scalars.items()}


@pytest.fixture(scope="module")
def traced_env():
    """The torchax environment once the jax family has prepared a step in it."""
    get_target("jax:jit:fp32").build(ToyWorkload(), "tiny", 0)
    import torchax

    return torchax.default_env()


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_a_traced_op_has_the_dtype_pytorch_gives(traced_env, name: str) -> None:
    expression = EXPRESSIONS[name]
    expected = expression(*_operands(lambda tensor: tensor)).dtype
    with traced_env:
        actual = expression(*_operands(lambda tensor: tensor.to("jax"))).dtype
    assert actual == expected, f"{name}: {actual} under torchax, {expected} in PyTorch"


def test_stylegan3_s_modulated_convolution_runs_in_the_autocast_dtype_as_on_the_cpu(traced_env) -> None:
    """It asks torch for the autocast dtype of its input's device: the jax device is one that has it."""
    from trainspeed.workloads.stylegan3.ops import modulated_conv2d

    def convolved(convert, device_type: str) -> torch.dtype:
        generator = torch.Generator().manual_seed(0)
        x, weight, styles = (torch.randn(*shape, generator=generator) for shape in ((2, 4, 6, 6), (5, 4, 3, 3), (2, 4)))
        with torch.autocast(device_type, dtype=torch.bfloat16):
            return modulated_conv2d(convert(x), convert(weight), convert(styles), padding=1).dtype

    assert convolved(lambda tensor: tensor, "cpu") == torch.bfloat16
    with traced_env:
        assert convolved(lambda tensor: tensor.to("jax"), "jax") == torch.bfloat16



CONVOLUTIONS = {  # name: (the op on (input, weight, bias), the weight's shape, the input's dtype)
    "F.conv1d": (lambda x, weight, bias: torch.nn.functional.conv1d(x[..., 0], weight), (5, 4, 3), torch.float32),
    "F.conv2d": (lambda x, weight, bias: torch.nn.functional.conv2d(x, weight, padding=1), (5, 4, 3, 3), torch.float32),
    "F.conv_transpose2d": (lambda x, weight, bias: torch.nn.functional.conv_transpose2d(x, weight, stride=2),
                           (4, 5, 3, 3), torch.float32),
    "F.conv2d, a bf16 input beside a float32 weight and bias": (
        lambda x, weight, bias: torch.nn.functional.conv2d(x, weight, bias), (5, 4, 1, 1), torch.bfloat16),
}


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_a_convolution_under_bf16_autocast_runs_in_bf16_as_torch_s_autocast_runs_it(traced_env, name: str) -> None:
    """torchax dispatches each of these as `aten.convolution`, which its autocast table lacked: a
    CNN's every convolution stayed fp32 under `jax:jit:bf16`; and PyTorch's own function refused
    a bf16 input beside a float32 bias (a squeeze-and-excitation block's) before torchax cast them."""
    op, weight_shape, input_dtype = CONVOLUTIONS[name]

    def convolved(convert) -> torch.dtype:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(2, 4, 6, 6, generator=generator).to(input_dtype)
        weight, bias = torch.randn(*weight_shape, generator=generator), torch.randn(5, generator=generator)
        return op(convert(x), convert(weight), convert(bias)).dtype

    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = convolved(lambda tensor: tensor)
    with traced_env, traced_env.override_property(autocast_dtype=torch.bfloat16):
        actual = convolved(lambda tensor: tensor.to("jax"))
    assert expected == torch.bfloat16 and actual == expected, f"{name}: {actual} under torchax, {expected} in PyTorch"
