"""Max pooling with a derivative, and adaptive max pooling.

torchax lowers `max_pool{2,3}d_with_indices` with one variadic `reduce_window` over (value, index)
pairs, for which JAX has no derivative: any step through `F.max_pool2d` (every ResNet's stem) fails
to linearize. Here the values are JAX's `reduce_window` max, whose derivative is XLA's native
select-and-scatter (the pooling gradient TPUs and GPUs run), and the indices PyTorch also returns
are taken from the input with its gradient stopped: integers carry no gradient, and a network that
uses them (`MaxUnpool`) reads them as PyTorch gives them.

torchax has no `adaptive_max_pool{1,2}d` at all (timm's `avgmax` and `max` heads call it). Its
windows are PyTorch's: output cell i of n over a length L spans [floor(iL/n), ceil((i+1)L/n)). A
rectangle's maximum is taken one axis at a time, and each cell's index from its own window.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence


def _per_dim(value: int | Sequence[int] | None, count: int, default: Sequence[int]) -> tuple[int, ...]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return tuple(default)
    if isinstance(value, int):
        return (value,) * count
    return tuple(value) if len(value) == count else tuple(value) * count


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length: with ceil_mode, a last window that starts in the right
    padding is dropped."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    length = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (length - 1) * stride >= size + padding:
        length -= 1
    return length


def _window(x: Any, spatial: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
            ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
    """reduce_window's window, strides, padding and dilation over all of x's dimensions, the last
    `spatial` of them pooled (a size given once holds for each)."""
    kernel = _per_dim(kernel_size, spatial, ())
    strides = _per_dim(stride, spatial, kernel)
    pads = _per_dim(padding, spatial, (0,) * spatial)
    dilations = _per_dim(dilation, spatial, (1,) * spatial)
    sizes = x.shape[-spatial:]
    padding_pairs = []
    for size, k, s, p, d in zip(sizes, kernel, strides, pads, dilations):
        length = output_size(size, k, s, p, d, ceil_mode)
        covered = (length - 1) * s + d * (k - 1) + 1
        padding_pairs.append((p, max(p, covered - size - p)))
    lead = x.ndim - spatial
    return ((1,) * lead + kernel, (1,) * lead + strides, ((0, 0),) * lead + tuple(padding_pairs),
            (1,) * lead + dilations)


def _lowest(dtype: Any) -> float | int:
    """The max's identity as a Python number: JAX recognises a constant identity (a traced array
    would not be) and lowers the window to XLA's max reduction, which has a derivative."""
    import jax.numpy as jnp

    return -math.inf if jnp.issubdtype(dtype, jnp.floating) else int(jnp.iinfo(dtype).min)


def max_pool_values(x: Any, spatial: int, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                    ceil_mode: bool = False) -> Any:
    """The windows' maxima. JAX differentiates XLA's max window only without dilation; a dilated
    window's maxima are gathered at their indices instead, which differentiates as a scatter."""
    import jax
    import jax.numpy as jnp

    window, strides, pads, dilations = _window(x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    if all(step == 1 for step in dilations):
        return jax.lax.reduce_window(x, _lowest(x.dtype), jax.lax.max, window, strides, pads, window_dilation=dilations)
    indices = max_pool_indices(x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    lead = x.shape[:-spatial]
    flat = x.reshape(lead + (-1,))
    picked = jnp.take_along_axis(flat, indices.reshape(indices.shape[:-spatial] + (-1,)), axis=-1)
    return picked.reshape(indices.shape)


def max_pool_indices(x: Any, spatial: int, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                     ceil_mode: bool = False) -> Any:
    """The flat index within each (sample, channel)'s plane of each window's maximum, the first on
    ties (PyTorch's CPU kernel); computed without a derivative (integers have none)."""
    import jax
    import jax.numpy as jnp

    x = jax.lax.stop_gradient(x)
    window, strides, pads, dilations = _window(x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    plane = x.shape[-spatial:]
    positions = jnp.broadcast_to(jnp.arange(math.prod(plane), dtype=jnp.int32).reshape(plane), x.shape)

    def first_maximum(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
        (a_value, a_index), (b_value, b_index) = a, b
        take_a = (a_value > b_value) | ((a_value == b_value) & (a_index < b_index)) | jnp.isnan(a_value)
        return jnp.where(take_a, a_value, b_value), jnp.where(take_a, a_index, b_index)

    _, indices = jax.lax.reduce_window((x, positions), (jnp.array(_lowest(x.dtype), x.dtype), jnp.array(-1, jnp.int32)), first_maximum,
                                       window, strides, pads, window_dilation=dilations)
    return indices


def max_pool_with_indices(spatial: int) -> Callable[..., tuple[Any, Any]]:
    """aten's `max_pool{2,3}d_with_indices` over `spatial` dimensions: (values, their indices), on
    batched or unbatched input."""

    def lowered(x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return max_pool_values(x, spatial, *args, **kwargs), max_pool_indices(x, spatial, *args, **kwargs)

    return lowered


def max_pool(spatial: int) -> Callable[..., Any]:
    """aten's `max_pool{1,2,3}d`: the values alone."""

    def lowered(x: Any, *args: Any, **kwargs: Any) -> Any:
        return max_pool_values(x, spatial, *args, **kwargs)

    return lowered


def _adaptive_windows(size: int, cells: int) -> list[tuple[int, int]]:
    return [((index * size) // cells, -(-((index + 1) * size) // cells)) for index in range(cells)]


def adaptive_max_pool(spatial: int) -> Callable[..., tuple[Any, Any]]:
    """aten's `adaptive_max_pool{1,2}d` over the last `spatial` dimensions: (values, indices)."""

    def lowered(x: Any, output_size: Any) -> tuple[Any, Any]:
        import itertools

        import jax
        import jax.numpy as jnp

        cells = _per_dim(output_size, spatial, ())
        sizes = x.shape[-spatial:]
        windows = [_adaptive_windows(size, count) for size, count in zip(sizes, cells)]
        values = x
        for axis, axis_windows in enumerate(windows):
            position = x.ndim - spatial + axis
            values = jnp.stack([jnp.max(jax.lax.slice_in_dim(values, start, stop, axis=position), axis=position)
                                for start, stop in axis_windows], axis=position)
        plain = jax.lax.stop_gradient(x)
        lead = x.shape[:-spatial]
        indices = []
        for cell in itertools.product(*windows):
            region = plain[(...,) + tuple(slice(start, stop) for start, stop in cell)]
            local = jnp.argmax(region.reshape(lead + (-1,)), axis=-1)
            coordinates = jnp.unravel_index(local, tuple(stop - start for start, stop in cell))
            flat = jnp.zeros_like(local)
            for (start, _), coordinate, size in zip(cell, coordinates, sizes):
                flat = flat * size + start + coordinate
            indices.append(flat)
        return values, jnp.stack(indices, axis=-1).reshape(values.shape).astype(jnp.int32)

    return lowered


def lowerings() -> dict[Any, Any]:
    """aten op -> its JAX function."""
    import torch

    aten = torch.ops.aten
    return {aten.max_pool2d_with_indices.default: max_pool_with_indices(2),
            aten.max_pool3d_with_indices.default: max_pool_with_indices(3),
            aten.max_pool1d.default: max_pool(1), aten.max_pool2d.default: max_pool(2), aten.max_pool3d.default: max_pool(3),
            aten.adaptive_max_pool2d.default: adaptive_max_pool(2), aten.adaptive_max_pool1d.default: adaptive_max_pool(1)}
