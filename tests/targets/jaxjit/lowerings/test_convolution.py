"""Convolutions run as PyTorch's functions on torchax (`lowerings.convolution`): PyTorch's outputs
and gradients, with and without bias, strided, grouped and transposed. (That they run in bf16 under
autocast is tests/targets/jaxjit/test_dtype_promotion.py's.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_and_jax import assert_same

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


def random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "conv1d with bias": (lambda x, w, b: F.conv1d(x, w, b, padding=1), (2, 4, 9), (6, 4, 3), 6),
    "conv2d strided, no bias": (lambda x, w, b: F.conv2d(x, w, stride=2, padding=1), (2, 4, 7, 7), (6, 4, 3, 3), None),
    "conv2d grouped, same padding": (lambda x, w, b: F.conv2d(x, w, b, padding="same", groups=2), (2, 4, 6, 6),
                                     (6, 2, 3, 3), 6),
    "conv3d with bias": (lambda x, w, b: F.conv3d(x, w, b), (1, 2, 4, 4, 4), (3, 2, 2, 2, 2), 3),
    "conv_transpose2d strided": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, output_padding=1),
                                 (2, 4, 5, 5), (4, 3, 3, 3), 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_and_gradients_match_pytorch(name: str) -> None:
    function, input_shape, weight_shape, bias_size = CASES[name]
    bias = random(bias_size, seed=2) if bias_size else torch.zeros(0)

    def convolved(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return function(x, weight, bias if bias.numel() else None)

    assert_same(convolved, random(*input_shape), random(*weight_shape, seed=1), bias, tolerance=1e-4)
