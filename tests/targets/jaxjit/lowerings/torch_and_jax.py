"""One torch function run twice: by PyTorch on the CPU, and on torchax with the jax family's
lowerings, each with the gradient of a fixed random projection of its output (so every output
element's gradient is checked, not only their sum's)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch


def environment() -> Any:
    import torchax

    from trainspeed.targets.jaxjit import lowerings

    env = torchax.default_env()
    lowerings.register(env)
    return env


def _first(output: Any) -> Any:
    return output[0] if isinstance(output, (tuple, list)) else output


def torch_run(function: Callable[..., Any], *inputs: torch.Tensor, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """(the first output, the gradients of each input) by PyTorch."""
    leaves = [value.detach().clone().requires_grad_(value.is_floating_point()) for value in inputs]
    output = _first(function(*leaves))
    weights = torch.randn(output.shape, generator=torch.Generator().manual_seed(seed), dtype=output.dtype)
    (output * weights).sum().backward()
    return output.detach().numpy(), [leaf.grad.numpy() if leaf.grad is not None else None for leaf in leaves]


def jax_run(function: Callable[..., Any], *inputs: torch.Tensor, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """The same on torchax, under `jax.vjp` over the floating inputs."""
    import jax
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    env = environment()
    arrays = [jnp.asarray(value.numpy()) for value in inputs]
    floating = [index for index, value in enumerate(inputs) if value.is_floating_point()]

    def on_arrays(*differentiated: Any) -> Any:
        values = list(arrays)
        for index, array in zip(floating, differentiated):
            values[index] = array
        with env:
            return _first(function(*(Tensor(array, env) for array in values)))._elem

    with jax.default_matmul_precision("float32"):
        output, pull_back = jax.vjp(on_arrays, *(arrays[index] for index in floating))
        weights = torch.randn(tuple(output.shape), generator=torch.Generator().manual_seed(seed))
        grads = pull_back(jnp.asarray(weights.numpy(), output.dtype))
    by_index = dict(zip(floating, grads))
    return np.asarray(output), [np.asarray(by_index[i]) if i in by_index else None for i in range(len(inputs))]


def assert_same(function: Callable[..., Any], *inputs: torch.Tensor, tolerance: float = 1e-5) -> None:
    """Outputs and gradients equal to float32 rounding (relative and absolute `tolerance`)."""
    expected, expected_grads = torch_run(function, *inputs)
    traced, traced_grads = jax_run(function, *inputs)
    np.testing.assert_allclose(traced, expected, rtol=tolerance, atol=tolerance)
    for got, want in zip(traced_grads, expected_grads):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
