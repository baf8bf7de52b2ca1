"""Max pooling on the jax family: PyTorch's values, indices and gradients, in every mode of the
op's arguments (torchax's own lowering has no derivative at all)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_and_jax import assert_same, environment

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


def images(*shape: int) -> torch.Tensor:
    """Distinct values, so no window has a tie and the gradient's place is the same for both."""
    count = int(np.prod(shape))
    return (torch.randperm(count, generator=torch.Generator().manual_seed(1)).float() / count).reshape(shape)


@pytest.mark.parametrize("arguments", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),  # ResNet's stem
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=1, padding=1, ceil_mode=True),
])
def test_max_pool2d_matches_pytorch(arguments: dict) -> None:
    assert_same(lambda x: F.max_pool2d(x, **arguments), images(2, 3, 9, 10))


def test_max_pool_on_unbatched_and_other_ranks_matches_pytorch() -> None:
    assert_same(lambda x: F.max_pool2d(x, 2), images(3, 8, 8))
    assert_same(lambda x: F.max_pool1d(x, 3, stride=2), images(2, 4, 11))
    assert_same(lambda x: F.max_pool3d(x, 2, padding=1), images(1, 2, 5, 6, 4))


def test_indices_are_pytorch_s() -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    x = images(2, 3, 9, 10)
    _, expected = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    env = environment()
    with env:
        _, traced = F.max_pool2d(Tensor(jnp.asarray(x.numpy()), env), 3, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(np.asarray(traced._elem), expected.numpy())


def test_max_unpool_of_the_indices_matches_pytorch() -> None:
    def pool_and_unpool(x: torch.Tensor) -> torch.Tensor:
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return F.max_unpool2d(values, indices, 2)

    assert_same(pool_and_unpool, images(2, 3, 8, 8))


@pytest.mark.parametrize("output_size", [1, 3, (2, 4), (5, 7)])
def test_adaptive_max_pool_matches_pytorch(output_size) -> None:
    assert_same(lambda x: F.adaptive_max_pool2d(x, output_size), images(2, 3, 9, 10))


def test_adaptive_max_pool_indices_and_one_dimension_match_pytorch() -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    assert_same(lambda x: F.adaptive_max_pool1d(x, 4), images(2, 3, 11))
    x = images(2, 3, 9, 10)
    _, expected = F.adaptive_max_pool2d(x, (4, 3), return_indices=True)
    env = environment()
    with env:
        _, traced = F.adaptive_max_pool2d(Tensor(jnp.asarray(x.numpy()), env), (4, 3), return_indices=True)
    np.testing.assert_array_equal(np.asarray(traced._elem), expected.numpy())
