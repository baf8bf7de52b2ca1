"""Batch normalization that updates its running statistics.

PyTorch's `native_batch_norm` (what `nn.BatchNorm*d` reaches in training) writes the batch's mean
and unbiased variance into the running buffers in place. torchax's lowering computes them and
drops them, so on the jax family a network's running statistics stayed at their initial values
and its validation normalized with mean 0 and variance 1. This lowering runs at the torch level on
torchax tensors, so it can write the buffers it is handed, as PyTorch's kernel does; the trainer
reads them back after the forward pass as the step's new buffers. The statistics are taken in
float32 (bf16 inputs included, as PyTorch's kernels accumulate) and carry no gradient.
"""

from __future__ import annotations

from typing import Any


def _normalized(x: Any, weight: Any, bias: Any, mean: Any, invstd: Any) -> Any:
    import jax.numpy as jnp

    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x.astype(jnp.float32) - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        y = y * weight.astype(jnp.float32).reshape(shape)
    if bias is not None:
        y = y + bias.astype(jnp.float32).reshape(shape)
    return y.astype(x.dtype)


def _elem(tensor: Any) -> Any:
    """A torchax tensor's array; a host tensor made inside the step (a constant) as an array."""
    import jax.numpy as jnp

    if tensor is None:
        return None
    return tensor._elem if hasattr(tensor, "_elem") else jnp.asarray(tensor.detach().numpy())


def _write(buffer: Any, value: Any) -> None:
    """`value` into a running statistic, as PyTorch's kernel writes it in place."""
    if not hasattr(buffer, "_elem"):
        raise TypeError("a running statistic of batch_norm in training is a host tensor, which a traced step cannot "
                        "write: register it as a buffer of the module")
    buffer._elem = value.astype(buffer._elem.dtype)


def batch_norm(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool,
               momentum: float, eps: float) -> tuple[Any, Any, Any]:
    """aten's `native_batch_norm` (and `_native_batch_norm_legit`) on torchax tensors: (output,
    the mean it used, the inverse standard deviation it used); in training the running buffers are
    written in place."""
    import jax
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    env = input._env
    x = input._elem
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        values = x.astype(jnp.float32)
        mean = jnp.mean(values, axis=axes)
        var = jnp.mean(jnp.square(values - mean.reshape((1, -1) + (1,) * (x.ndim - 2))), axis=axes)
        count = x.size // x.shape[1]
        kept_mean, kept_var = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(var)
        if running_mean is not None:
            _write(running_mean, (1 - momentum) * _elem(running_mean) + momentum * kept_mean)
        if running_var is not None:
            unbiased = kept_var * (count / max(count - 1, 1))
            _write(running_var, (1 - momentum) * _elem(running_var) + momentum * unbiased)
    else:
        mean, var = _elem(running_mean).astype(jnp.float32), _elem(running_var).astype(jnp.float32)
    invstd = jax.lax.rsqrt(var + eps)
    output = _normalized(x, _elem(weight), _elem(bias), mean, invstd)
    if not training:
        mean, invstd = jnp.zeros((0,), jnp.float32), jnp.zeros((0,), jnp.float32)
    return Tensor(output, env), Tensor(mean, env), Tensor(invstd, env)


def batch_norm_no_training(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
                           momentum: float, eps: float) -> tuple[Any, Any, Any]:
    """aten's `_native_batch_norm_legit_no_training`."""
    return batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)


def batch_norm_no_stats(input: Any, weight: Any, bias: Any, training: bool, momentum: float, eps: float
                        ) -> tuple[Any, Any, Any]:
    """aten's `_native_batch_norm_legit.no_stats` (no running buffers: the batch's statistics)."""
    return batch_norm(input, weight, bias, None, None, True, momentum, eps)


TORCH_LEVEL = True
"""These functions take torchax tensors (they write buffers), not JAX arrays."""


def lowerings() -> dict[Any, Any]:
    import torch

    aten = torch.ops.aten
    return {aten.native_batch_norm.default: batch_norm, aten._native_batch_norm_legit.default: batch_norm,
            aten._native_batch_norm_legit.no_stats: batch_norm_no_stats,
            aten._native_batch_norm_legit_no_training.default: batch_norm_no_training}
