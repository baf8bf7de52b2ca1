"""BatchNorm on the jax family: PyTorch's outputs and gradients, and the running statistics a
training forward pass writes (torchax's own lowering dropped them, so validation normalized with
the initial mean 0 and variance 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_and_jax import assert_same, environment

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


def random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [(6, 4), (6, 4, 5), (6, 4, 5, 3), (3, 4, 2, 3, 2)])
def test_training_outputs_and_gradients_match_pytorch(shape: tuple[int, ...]) -> None:
    def normalized(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, weight, bias, training=True, momentum=0.1, eps=1e-5)

    assert_same(normalized, random(*shape) * 3 + 1, random(4, seed=1).abs() + 0.5, random(4, seed=2), tolerance=1e-4)


def test_evaluation_normalizes_with_the_running_statistics() -> None:
    def normalized(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        mean, var = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([4.0, 0.25, 1.0])
        return F.batch_norm(x, mean, var, weight, bias, training=False, eps=1e-5)

    assert_same(normalized, random(2, 3, 4, 4), random(3, seed=1), random(3, seed=2))


@pytest.mark.parametrize("affine", [True, False])
def test_the_running_statistics_are_written_as_pytorch_writes_them(affine: bool) -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    eager, traced = nn.BatchNorm2d(3, momentum=0.3, affine=affine), nn.BatchNorm2d(3, momentum=0.3, affine=affine)
    env = environment()
    with env:
        traced.to("jax")
    for step in range(3):
        batch = random(5, 3, 4, 4, seed=step) * (step + 1) + step
        expected = eager(batch)
        with env:
            output = traced(Tensor(jnp.asarray(batch.numpy()), env))
        np.testing.assert_allclose(np.asarray(output._elem), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(np.asarray(getattr(traced, name)._elem), getattr(eager, name).numpy(), rtol=1e-5)
    assert int(np.asarray(traced.num_batches_tracked._elem)) == 3
