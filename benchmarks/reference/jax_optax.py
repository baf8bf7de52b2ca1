"""JAX + optax reference peer: the Mahjong policy net and its training step in plain JAX.

The same network as trainspeed's and plain_torch.py's (same parameter shapes, same matmuls, so the
same FLOPs per sample), written with jax.numpy and jax.nn only, trained with optax's AdamW under
one `jax.jit`ted step that donates its parameters and optimizer state. Rows use trainspeed's
result schema, so they share one JSONL and one `trainspeed plot` with trainspeed's own rows.

    python benchmarks/reference/jax_optax.py --size tiny --batch-sizes 2^6..2^10 --threads 1 \\
        --out results/peers.jsonl

Threads: XLA's CPU client sizes its intra-op thread pool from the CPUs the process may run on,
once, when the backend starts. With `--threads N` the process is pinned to N CPUs while the
backend starts and released right after, so the pool has N threads but no thread stays pinned
(as torch.set_num_threads leaves torch's threads free to move); Eigen's own multi-threading is
switched off at N=1. The measured CPU time per wall second is recorded in every row as a check.
On another device (`--device cuda`, `--device tpu`) the step runs in no XLA CPU pool, so `--threads`
pins nothing there and is recorded as not applied.

It imports no torch (nor does `common.py`), so it runs on a host with only JAX, optax and
trainspeed's torch-free modules, such as a TPU VM:

    python benchmarks/reference/jax_optax.py --size base --device tpu --precision bf16 \\
        --batch-sizes 2^6..2^12 --out results/peers.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file: import this checkout's packages (benchmarks, trainspeed), not an installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import importlib.metadata
import math
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.reference.common import (
    ADAM_EPS,
    BETAS,
    DEVICES,
    ILLEGAL_LOGIT,
    INIT_STD,
    LAYER_NORM_EPS,
    LEARNING_RATE,
    MLP_RATIO,
    NUM_ACTIONS,
    NUM_FEATURES,
    NUM_TILE_TYPES,
    TILE_ACTION_STARTS,
    SIZES,
    WEIGHT_DECAY,
    Measurement,
    NetSize,
    PeerConfig,
    UsageError,
    build_parser,
    cpu_model_name,
    run_main,
    synthetic_batch,
    time_windows,
)

PROG = "jax_optax.py"
JAX_DEVICES = (*DEVICES, "tpu")
"""JAX platforms the peer runs on: the PyTorch peer's, and a TPU."""
Params = dict[str, Any]
"""Nested dicts of arrays; a linear layer is {"weight": (out, in), "bias": (out,)} as in torch."""

COMPUTE_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "bf16-stream": jnp.bfloat16}
STREAM_DTYPES = {"bf16-stream": jnp.bfloat16}
"""The residual stream's dtype where it is not fp32: `bf16-stream` is trainspeed's switch of that
name (`base+bf16-stream`) given to the peer, so a bf16 step with it is set against a peer with it."""
JAX_PRECISIONS = tuple(COMPUTE_DTYPES)
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


# --- the network ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamSpec:
    """One parameter before it exists: its shape and how it starts."""

    shape: tuple[int, ...]
    fill: str = "normal"
    """normal (N(0, std)), zeros or ones."""
    std: float = INIT_STD


def _linear_specs(n_in: int, n_out: int, std: float = INIT_STD) -> dict[str, ParamSpec]:
    return {"weight": ParamSpec((n_out, n_in), "normal", std), "bias": ParamSpec((n_out,), "zeros")}


def _norm_specs(width: int) -> dict[str, ParamSpec]:
    return {"weight": ParamSpec((width,), "ones"), "bias": ParamSpec((width,), "zeros")}


def param_specs(size: NetSize) -> Params:
    """The parameter tree as specs: shapes for counting (FLOPs, tests) without allocating anything.

    N(0, 0.02) weights, zero biases and position embedding, unit LayerNorms, and GPT-2's
    scaled-down residual projections: the same scheme as the other implementations.
    """
    width, hidden = size.width, MLP_RATIO * size.width
    residual_std = INIT_STD / math.sqrt(2 * size.blocks)
    block = {
        "attn_norm": _norm_specs(width),
        "qkv": _linear_specs(width, 3 * width),
        "attn_out": _linear_specs(width, width, residual_std),
        "mlp_norm": _norm_specs(width),
        "mlp_in": _linear_specs(width, hidden),
        "mlp_out": _linear_specs(hidden, width, residual_std),
    }
    return {
        "embed": _linear_specs(NUM_FEATURES, width),
        "position": ParamSpec((1, NUM_TILE_TYPES, width), "zeros"),
        "blocks": [dict(block) for _ in range(size.blocks)],
        "final_norm": _norm_specs(width),
        "head": _linear_specs(width, NUM_ACTIONS),
        "tile_head": _linear_specs(width, len(TILE_ACTION_STARTS)),
    }


def _is_spec(node: Any) -> bool:
    return isinstance(node, ParamSpec)


def init_params(size: NetSize, seed: int) -> Params:
    """fp32 host arrays drawn with numpy: no XLA compilation per parameter, as eager jax.random would cost."""
    rng = np.random.default_rng(seed)

    def make(spec: ParamSpec) -> np.ndarray:
        if spec.fill == "normal":
            return (spec.std * rng.standard_normal(spec.shape)).astype(np.float32)
        return (np.ones if spec.fill == "ones" else np.zeros)(spec.shape, np.float32)

    return jax.tree_util.tree_map(make, param_specs(size), is_leaf=_is_spec)


def _linear(layer: Params, x: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """x @ weight.T + bias with `dtype` inputs and fp32 accumulation, output in `dtype` (autocast-like)."""
    y = jnp.einsum("...i,oi->...o", x.astype(dtype), layer["weight"].astype(dtype), preferred_element_type=jnp.float32)
    return (y + layer["bias"]).astype(dtype)


def _layer_norm(norm: Params, x: jax.Array, stream: jnp.dtype = jnp.float32) -> jax.Array:
    """Computed in fp32 whatever the compute dtype, as autocast runs layer_norm; handed on in the
    stream's dtype."""
    x = x.astype(jnp.float32)
    mean = x.mean(axis=-1, keepdims=True)
    variance = jnp.square(x - mean).mean(axis=-1, keepdims=True)
    return ((x - mean) * jax.lax.rsqrt(variance + LAYER_NORM_EPS) * norm["weight"] + norm["bias"]).astype(stream)


def _attention(block: Params, x: jax.Array, heads: int, dtype: jnp.dtype) -> jax.Array:
    """Bidirectional multi-head attention; softmax in fp32."""
    batch, tokens, width = x.shape
    head_dim = width // heads
    qkv = _linear(block["qkv"], x, dtype).reshape(batch, tokens, 3, heads, head_dim)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (batch, tokens, heads, head_dim)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(head_dim)
    weights = jax.nn.softmax(scores, axis=-1).astype(dtype)
    y = jnp.einsum("bhqk,bkhd->bqhd", weights, v, preferred_element_type=jnp.float32).astype(dtype)
    return _linear(block["attn_out"], y.reshape(batch, tokens, width), dtype)


def forward(params: Params, features: jax.Array, mask: jax.Array, size: NetSize, dtype: jnp.dtype = jnp.float32,
            stream: jnp.dtype = jnp.float32) -> jax.Array:
    """features (B, 86, 34), legal mask (B, 82) -> float32 logits with illegal actions at -1e9.

    The residual stream stays fp32 (a bf16 branch added to it is promoted), as under autocast,
    unless `stream` says otherwise.
    """
    tokens = jnp.swapaxes(features, 1, 2)  # (B, 34 tile types, 86 features)
    x = (_linear(params["embed"], tokens, dtype) + params["position"].astype(stream)).astype(stream)
    for block in params["blocks"]:
        x = (x + _attention(block, _layer_norm(block["attn_norm"], x, stream), size.heads, dtype)).astype(stream)
        hidden = jax.nn.gelu(_linear(block["mlp_in"], _layer_norm(block["mlp_norm"], x, stream), dtype), approximate=True)
        x = (x + _linear(block["mlp_out"], hidden, dtype)).astype(stream)
    x = _layer_norm(params["final_norm"], x, stream)
    logits = _linear(params["head"], x.mean(axis=1), dtype).astype(jnp.float32)
    per_tile = _linear(params["tile_head"], x, dtype).astype(jnp.float32)  # (B, 34, 2)
    for column, start in enumerate(TILE_ACTION_STARTS):
        logits = logits.at[:, start:start + NUM_TILE_TYPES].add(per_tile[..., column])
    return jnp.where(mask, logits, ILLEGAL_LOGIT)


def cross_entropy(logits: jax.Array, action: jax.Array) -> jax.Array:
    """Mean cross-entropy of the taken action under the masked logits."""
    return optax.softmax_cross_entropy_with_integer_labels(logits, action).mean()


def loss_fn(
    params: Params, features: jax.Array, mask: jax.Array, action: jax.Array, size: NetSize, dtype: jnp.dtype = jnp.float32,
    stream: jnp.dtype = jnp.float32,
) -> jax.Array:
    return cross_entropy(forward(params, features, mask, size, dtype, stream), action)


def make_optimizer() -> optax.GradientTransformation:
    """AdamW as torch.optim.AdamW: decoupled weight decay on every parameter."""
    return optax.adamw(learning_rate=LEARNING_RATE, b1=BETAS[0], b2=BETAS[1], eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)


TrainStep = Callable[[Params, Any, jax.Array, jax.Array, jax.Array], tuple[Params, Any, jax.Array]]


def make_train_step(size: NetSize, precision: str, optimizer: optax.GradientTransformation) -> TrainStep:
    """One jitted step: loss and gradients, AdamW update. Parameters and optimizer state are
    donated, so XLA updates them in place as a hand-written JAX training loop would."""
    loss_and_grad = jax.value_and_grad(partial(loss_fn, size=size, dtype=COMPUTE_DTYPES[precision],
                                               stream=STREAM_DTYPES.get(precision, jnp.float32)))

    def train_step(params: Params, opt_state: Any, features: jax.Array, mask: jax.Array, action: jax.Array):
        loss, grads = loss_and_grad(params, features, mask, action)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(train_step, donate_argnums=(0, 1))


def param_shapes(size: NetSize) -> list[tuple[int, ...]]:
    """Every parameter's shape, without allocating any."""
    return [spec.shape for spec in jax.tree_util.tree_leaves(param_specs(size), is_leaf=_is_spec)]


def flops_per_sample(size: NetSize) -> int:
    """Training matmul FLOPs per sample, counted from this peer's own parameter shapes.

    Each linear layer (a dict with a 2-D "weight") runs once per token (the tile head too), except
    the head, which runs once on the pooled vector; attention adds q.k^T and weights.v per block. Backward costs
    twice the forward, except the embedding's input gradient, which the observation does not need.
    """
    specs = param_specs(size)
    tokens = NUM_TILE_TYPES

    def linear_flops(layer: dict[str, ParamSpec], rows: int) -> int:
        n_out, n_in = layer["weight"].shape
        return 2 * rows * n_in * n_out

    forward_flops = (linear_flops(specs["embed"], tokens) + linear_flops(specs["head"], 1)
                     + linear_flops(specs["tile_head"], tokens))
    for block in specs["blocks"]:
        forward_flops += sum(linear_flops(block[name], tokens) for name in ("qkv", "attn_out", "mlp_in", "mlp_out"))
        width = block["attn_out"]["weight"].shape[1]
        forward_flops += 2 * (2 * tokens * tokens * width)
    return 3 * forward_flops - linear_flops(specs["embed"], tokens)


def flops_for_size(size: str) -> int:
    return flops_per_sample(SIZES[size])


# --- threads, compilations, the peer -----------------------------------------------------------


def start_backend(device: str, threads: int | None) -> tuple[jax.Device, int, str]:
    """Start JAX's backend for `device` with an intra-op pool of `threads` (see the module doc).

    Returns the device, the thread count in effect, and how it was set. Must run before anything
    else in the process starts a JAX backend. Only the CPU backend's pool is sized: on another
    device, `threads` pins nothing.
    """
    allowed = os.sched_getaffinity(0)
    if threads is not None and threads > len(allowed):
        raise UsageError(f"--threads {threads}: this process may use only {len(allowed)} CPUs")
    pin = threads is not None and device == "cpu"
    if pin and threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    jax.config.update("jax_platforms", device)
    if pin:
        os.sched_setaffinity(0, sorted(allowed)[:threads])
    try:
        chosen = jax.devices()[0]
    except Exception as error:  # noqa: BLE001 - JAX 0.10 fails a bare assert when no such backend exists
        reason = (str(error).strip().splitlines() or [f"{type(error).__name__}, no {device} backend installed"])[0]
        raise UsageError(
            f"--device {device}: JAX cannot start that backend ({reason}); a CUDA run needs jax[cuda12]"
            if device == "cuda"
            else f"--device {device}: JAX cannot start that backend ({reason})"
        ) from None
    finally:
        if pin:
            for thread_id in os.listdir("/proc/self/task"):
                os.sched_setaffinity(int(thread_id), allowed)
    if device != "cpu":
        return chosen, len(allowed) if threads is None else threads, (
            f"not applied: --device {device} runs the step in no XLA CPU pool; the process may use {len(allowed)} CPUs")
    if threads is None:
        return chosen, len(allowed), "XLA default: one intra-op thread per CPU the process may use"
    return chosen, threads, f"XLA CPU pool sized by pinning the process to {threads} CPU(s) while the backend started, then unpinned"


class CompileCounter:
    """XLA compilations in this process, from JAX's public monitoring events (any jit, not only the step)."""

    def __init__(self) -> None:
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration_s: float, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self.count += 1

    def __call__(self) -> int:
        return self.count


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


class JaxPeer:
    """The plain-JAX net + optax AdamW under one jitted step, fp32 or bf16 compute."""

    def __init__(self, config: PeerConfig) -> None:
        self.config = config
        self.device, self.threads, thread_method = start_backend(config.device, config.threads)
        self.compiles = CompileCounter()
        precision = "bf16:bf16-stream" if config.precision == "bf16-stream" else config.precision  # as trainspeed's options follow
        self.target = f"reference-jax:{config.device}:jit:{precision}"
        self.device_name = (
            f"{cpu_model_name()} ({self.threads} threads)" if self.device.platform == "cpu" else self.device.device_kind
        )
        self.torch_version = None
        self.flops_per_sample = flops_for_size(config.size)
        self.optimizer = make_optimizer()
        self.extra: dict[str, Any] = {
            "implementation": "benchmarks/reference/jax_optax.py",
            "jax_version": jax.__version__,
            "jaxlib_version": _version("jaxlib"),
            "optax_version": _version("optax"),
            "jax_platform": self.device.platform,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "thread_method": thread_method,
            "precision_detail": (
                "fp32 parameters and AdamW state; bf16 matmul inputs with fp32 accumulation, "
                "LayerNorm, softmax, residual stream and loss in fp32 (autocast-like)"
                if config.precision == "bf16"
                else "as bf16, with the residual stream, its adds and the LayerNorms' outputs in bf16 "
                "(trainspeed's bf16-stream switch)"
                if config.precision == "bf16-stream"
                else "fp32"
            ),
            "optimizer": f"optax.adamw(learning_rate={LEARNING_RATE}, b1={BETAS[0]}, b2={BETAS[1]}, "
            f"eps={ADAM_EPS}, weight_decay={WEIGHT_DECAY})",
        }

    def measure(self, batch_size: int) -> Measurement:
        """Fresh parameters, optimizer state, batch and jitted step (so the first step compiles), timed."""
        params = jax.device_put(init_params(self.config.net_size, self.config.seed), self.device)
        state = {"params": params, "opt": self.optimizer.init(params)}
        train_step = make_train_step(self.config.net_size, self.config.precision, self.optimizer)
        host = synthetic_batch(batch_size, self.config.seed)
        batch = jax.device_put((host.features, host.mask, host.action.astype(np.int32)), self.device)

        def step() -> jax.Array:
            state["params"], state["opt"], loss = train_step(state["params"], state["opt"], *batch)
            return loss

        def finish(loss: jax.Array) -> float:
            jax.block_until_ready((state["params"], state["opt"], loss))
            return float(loss)

        timing = time_windows(step, finish, self.config.plan, self.compiles)
        stats = self.device.memory_stats() if self.device.platform != "cpu" else None
        return Measurement(timing=timing, peak_memory_bytes=(stats or {}).get("peak_bytes_in_use"))

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, MemoryError) or "RESOURCE_EXHAUSTED" in str(error)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(
        PROG,
        "JAX + optax reference peer: time the plain-JAX Mahjong policy net's jitted training step.",
        compile_help="accepted for the same command line as plain_torch.py; the JAX step is always jit-compiled",
        devices=JAX_DEVICES,
        precisions=JAX_PRECISIONS,
    )
    return run_main(PROG, argv, parser, JaxPeer)


if __name__ == "__main__":
    sys.exit(main())
