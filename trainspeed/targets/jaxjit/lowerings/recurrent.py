"""Recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN`) as one scan over time.

torchax has no lowering of `torch.lstm` and its kin, so PyTorch decomposes them into one cell per
time step and layer: a program that grows with the sequence, compiles for as long, and ran a
2-layer LSTM language model at 0.14x eager PyTorch on this CPU. Here each layer and direction is:

1. the input's projection for every time step at once (one matmul over time x batch);
2. `lax.scan` over time of the hidden state's projection and the gates, which is all that must be
   sequential.

The gates, their order and the cuDNN-style double bias are PyTorch's (LSTM: i, f, g, o; GRU: r, z,
n with the reset gate applied to the hidden projection and its bias). Dropout between layers, as
`nn.LSTM(dropout=p)` applies it in training, draws from the step's random key. (Packed sequences
never get here: torchax has no lowering of `pack_padded_sequence`, which the step's refusal names.)
"""

from __future__ import annotations

from typing import Any, Callable

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _sigmoid_and_tanh(gates: Any, tanh_quarter: int) -> Any:
    """The logistic of every gate but quarter `tanh_quarter`, which gets tanh = 2 logistic(2x) - 1:
    one elementwise pass over all four quarters (on XLA's CPU, separate passes per gate cost more
    than the step's matmul)."""
    import jax
    import jax.numpy as jnp

    width = gates.shape[-1] // 4
    lanes = jnp.arange(gates.shape[-1])
    is_tanh = (lanes >= tanh_quarter * width) & (lanes < (tanh_quarter + 1) * width)
    scale = jnp.where(is_tanh, 2.0, 1.0).astype(gates.dtype)
    logistic = jax.nn.sigmoid(gates * scale)
    return jnp.where(is_tanh, 2 * logistic - 1, logistic)


def _cell(kind: str) -> Callable[..., Any]:
    """One time step of `kind`: (carry, the input's projection at t, w_hh, b_hh, w_hr) -> (carry, output)."""
    import jax
    import jax.numpy as jnp

    def matmul(h: Any, weight: Any) -> Any:
        return jnp.matmul(h, weight.T, preferred_element_type=jnp.float32).astype(h.dtype)

    def lstm(carry: tuple[Any, Any], projected: Any, w_hh: Any, b_hh: Any, w_hr: Any) -> tuple[Any, Any]:
        h, c = carry
        gates = projected + matmul(h, w_hh) + (0 if b_hh is None else b_hh)
        i, f, g, o = jnp.split(_sigmoid_and_tanh(gates, 2), 4, axis=-1)
        c = f * c + i * g
        h = o * jnp.tanh(c)
        if w_hr is not None:
            h = matmul(h, w_hr)
        return (h, c), h

    def gru(carry: tuple[Any], projected: Any, w_hh: Any, b_hh: Any, w_hr: Any) -> tuple[Any, Any]:
        (h,) = carry
        hidden = matmul(h, w_hh) + (0 if b_hh is None else b_hh)
        x_r, x_z, x_n = jnp.split(projected, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(hidden, 3, axis=-1)
        r, z = jax.nn.sigmoid(x_r + h_r), jax.nn.sigmoid(x_z + h_z)
        n = jnp.tanh(x_n + r * h_n)
        h = (1 - z) * n + z * h
        return (h,), h

    def simple(activation: Callable[[Any], Any]) -> Callable[..., Any]:
        def step(carry: tuple[Any], projected: Any, w_hh: Any, b_hh: Any, w_hr: Any) -> tuple[Any, Any]:
            (h,) = carry
            h = activation(projected + matmul(h, w_hh) + (0 if b_hh is None else b_hh))
            return (h,), h

        return step

    return {"lstm": lstm, "gru": gru, "rnn_tanh": simple(jnp.tanh), "rnn_relu": simple(jax.nn.relu)}[kind]


def _direction(kind: str, xs: Any, carry: tuple[Any, ...], weights: list[Any], has_biases: bool
               ) -> tuple[Any, tuple[Any, ...]]:
    """One layer in one direction over time-major `xs`: (outputs per time step, the last carry)."""
    import jax
    import jax.numpy as jnp

    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    w_hr = weights[-1] if len(weights) in (3, 5) else None  # an LSTM with proj_size
    projected = jnp.matmul(xs, w_ih.T, preferred_element_type=jnp.float32).astype(xs.dtype)
    if b_ih is not None:
        projected = projected + b_ih
    if kind == "lstm" and b_hh is not None:  # the LSTM's hidden bias adds to every gate: once, outside the scan
        projected, b_hh = projected + b_hh, None
    cell = _cell(kind)

    def step(state: tuple[Any, ...], projected_t: Any) -> tuple[tuple[Any, ...], Any]:
        return cell(state, projected_t, w_hh, b_hh, w_hr)

    carry, outputs = jax.lax.scan(step, carry, projected)
    return outputs, carry


def _recurrent(kind: str, input: Any, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
               train: bool, bidirectional: bool, batch_first: bool, env: Any = None) -> tuple[Any, ...]:
    import jax
    import jax.numpy as jnp

    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    unbatched = input.ndim == 2
    xs = input[:, None] if unbatched else (jnp.swapaxes(input, 0, 1) if batch_first else input)
    states = [state[:, None] if unbatched else state for state in states]
    directions = 2 if bidirectional else 1
    per_layer = len(params) // (num_layers * directions)
    finals: list[list[Any]] = [[] for _ in states]
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            weights = list(params[index * per_layer:(index + 1) * per_layer])
            carry = tuple(state[index] for state in states)
            sequence = xs if direction == 0 else jnp.flip(xs, 0)
            output, carry = _direction(kind, sequence, carry, weights, has_biases)
            outputs.append(output if direction == 0 else jnp.flip(output, 0))
            for kept, value in zip(finals, carry):
                kept.append(value)
        xs = outputs[0] if directions == 1 else jnp.concatenate(outputs, axis=-1)
        if dropout and train and layer < num_layers - 1:
            keep = jax.random.bernoulli(env.get_and_rotate_prng_key(), 1.0 - dropout, xs.shape)
            xs = jnp.where(keep, xs / (1.0 - dropout), 0).astype(xs.dtype)
    output = xs[:, 0] if unbatched else (jnp.swapaxes(xs, 0, 1) if batch_first else xs)
    last = [jnp.stack(values)[:, 0] if unbatched else jnp.stack(values) for values in finals]
    return (output, *last)


def _lowering(kind: str) -> Callable[..., Any]:
    def lowered(*args: Any, env: Any = None, **kwargs: Any) -> Any:
        return _recurrent(kind, *args, env=env, **kwargs)

    lowered.needs_env = True  # type: ignore[attr-defined]  # dropout between layers draws the step's key
    lowered.__name__ = kind
    return lowered


def lowerings() -> dict[Any, Any]:
    """torch functions (PyTorch's recurrent modules call them through `torch._VF`) -> their scans."""
    import torch

    return {getattr(torch, kind): _lowering(kind) for kind in GATES}
