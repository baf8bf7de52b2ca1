"""Transformer peers written for the chip in plain JAX: GPT-2 (124M) and ViT-S/16, the same networks
as trainspeed's `hf:gpt2` and `timm:vit_small_patch16_224` (same layers, widths, vocabulary and
optimizer, so the same FLOPs per sample), trained as a JAX user would write them for a TPU:

- the layers' weights stacked and the blocks run as one `lax.scan`, each block recomputed in the
  backward pass but for its matmuls' outputs (`jax.checkpoint`, dots saveable);
- activations in bf16 (under `--precision bf16`), LayerNorm's statistics and the softmax in float32,
  float32 master weights and optax's optimizer state;
- the same kernels trainspeed's jax family lowers to: its attention (JAX's Pallas flash attention
  on a TPU, XLA's attention elsewhere) and its loss over chunks of tokens, loaded from trainspeed's
  own files (`trainspeed/targets/jaxjit/lowerings/attention.py`, `cross_entropy.py`), which import
  no torch.

Rows use trainspeed's schema, with the workload and size of the trainspeed rows they stand beside,
and the FLOPs per sample of those rows' export (`--flops-from EXPORTED/manifest.json`), so MFU and
ratios compare like with like:

    python benchmarks/reference/jax_transformers.py --model gpt2 --device tpu --precision bf16 \\
        --batch-sizes 8,32 --flops-from .tpu/gpt2/manifest.json --run-id RUN --out rows.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import dataclasses
import importlib.util
import json
import math
import shlex
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.reference.common import WindowPlan, _first_line, _now, describe, time_windows
from trainspeed.bench.mfu import Peaks, row_nominal_peak, with_flops
from trainspeed.bench.results import ResultRow, append_row, measured_row
from trainspeed.errors import UsageError
from trainspeed.machine import Machine

REPO = Path(__file__).resolve().parents[2]
LOWERINGS = REPO / "trainspeed" / "targets" / "jaxjit" / "lowerings"
INIT_STD = 0.02
LAYER_NORM_EPS = {"gpt2": 1e-5, "vit": 1e-6}


def _own_file(name: str) -> Any:
    """A module of trainspeed's lowerings loaded by its path: its package would import torch."""
    spec = importlib.util.spec_from_file_location(f"peer_{name}", LOWERINGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


ATTENTION = _own_file("attention")
CROSS_ENTROPY = _own_file("cross_entropy")


@dataclass(frozen=True)
class Model:
    """One network's shape, optimizer and trainspeed names."""

    kind: str
    workload: str
    size: str
    layers: int
    width: int
    heads: int
    mlp: int
    tokens: int
    vocabulary: int = 0
    """GPT-2: the token vocabulary; ViT: the classes."""
    patch: int = 0
    resolution: int = 0


MODELS = {
    "gpt2": Model("gpt2", "hf:gpt2", "base,attn_pdrop=0,embd_pdrop=0,resid_pdrop=0", 12, 768, 12, 3072, 1024, 50257),
    "vit_s16": Model("vit", "timm:vit_small_patch16_224", "base,opt=adamw", 12, 384, 6, 1536, 197, 1000, 16, 224),
}


def _optimizer(model: Model) -> optax.GradientTransformation:
    """trainspeed's recipes at their reference batch (the peers time steps; the rate does not change them)."""
    if model.kind == "gpt2":
        return optax.adamw(6e-4, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1)
    return optax.adamw(1e-3, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.05)


def init_params(model: Model, key: Any) -> dict[str, Any]:
    """Float32 weights: normal(0.02) matrices, zero biases, unit LayerNorm gains; blocks stacked."""
    keys = iter(jax.random.split(key, 16))
    layers, width, mlp = model.layers, model.width, model.mlp

    def normal(*shape: int) -> Any:
        return jax.random.normal(next(keys), shape, jnp.float32) * INIT_STD

    blocks = {"ln1_g": jnp.ones((layers, width)), "ln1_b": jnp.zeros((layers, width)),
              "qkv_w": normal(layers, width, 3 * width), "qkv_b": jnp.zeros((layers, 3 * width)),
              "proj_w": normal(layers, width, width), "proj_b": jnp.zeros((layers, width)),
              "ln2_g": jnp.ones((layers, width)), "ln2_b": jnp.zeros((layers, width)),
              "fc_w": normal(layers, width, mlp), "fc_b": jnp.zeros((layers, mlp)),
              "out_w": normal(layers, mlp, width), "out_b": jnp.zeros((layers, width))}
    params = {"blocks": blocks, "lnf_g": jnp.ones((width,)), "lnf_b": jnp.zeros((width,))}
    if model.kind == "gpt2":
        params.update(wte=normal(model.vocabulary, width), wpe=normal(model.tokens, width))
    else:
        patch_inputs = 3 * model.patch * model.patch
        params.update(patch_w=normal(patch_inputs, width), patch_b=jnp.zeros((width,)), cls=normal(1, 1, width),
                      pos=normal(1, model.tokens, width), head_w=normal(width, model.vocabulary),
                      head_b=jnp.zeros((model.vocabulary,)))
    return params


def layer_norm(x: Any, gain: Any, bias: Any, eps: float) -> Any:
    values = x.astype(jnp.float32)
    mean = values.mean(-1, keepdims=True)
    variance = jnp.square(values - mean).mean(-1, keepdims=True)
    return ((values - mean) * jax.lax.rsqrt(variance + eps) * gain + bias).astype(x.dtype)


def block(model: Model, x: Any, weights: dict[str, Any], dtype: Any) -> Any:
    """One pre-LayerNorm transformer block on (batch, tokens, width) activations in `dtype`."""
    batch, tokens, width = x.shape
    heads = model.heads
    cast = {name: value.astype(dtype) for name, value in weights.items()}
    eps = LAYER_NORM_EPS[model.kind]
    qkv = layer_norm(x, weights["ln1_g"], weights["ln1_b"], eps) @ cast["qkv_w"] + cast["qkv_b"]
    q, k, v = (part.reshape(batch, tokens, heads, width // heads).transpose(0, 2, 1, 3)
               for part in jnp.split(qkv, 3, axis=-1))
    attended = ATTENTION.scaled_dot_product_attention(q, k, v, is_causal=model.kind == "gpt2")
    x = x + attended.transpose(0, 2, 1, 3).reshape(batch, tokens, width) @ cast["proj_w"] + cast["proj_b"]
    hidden = layer_norm(x, weights["ln2_g"], weights["ln2_b"], eps) @ cast["fc_w"] + cast["fc_b"]
    hidden = jax.nn.gelu(hidden, approximate=model.kind == "gpt2")
    return x + hidden @ cast["out_w"] + cast["out_b"]


def blocks(model: Model, x: Any, stacked: dict[str, Any], dtype: Any) -> Any:
    body = jax.checkpoint(lambda carry, weights: (block(model, carry, weights, dtype), None), prevent_cse=False,
                          policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    return jax.lax.scan(body, x, stacked)[0]


def loss_of(model: Model, params: dict[str, Any], batch: dict[str, Any], dtype: Any) -> Any:
    eps = LAYER_NORM_EPS[model.kind]
    if model.kind == "gpt2":
        tokens = batch["tokens"]
        x = (params["wte"][tokens] + params["wpe"][: tokens.shape[1]]).astype(dtype)
        x = layer_norm(blocks(model, x, params["blocks"], dtype), params["lnf_g"], params["lnf_b"], eps)
        return CROSS_ENTROPY.linear_cross_entropy(x[:, :-1], params["wte"].astype(dtype), None, tokens[:, 1:])
    images = (batch["images"].astype(jnp.float32) - 127.5) / 127.5  # the workload's per-channel normalization, as cost
    batch_size, patch = images.shape[0], model.patch
    grid = model.resolution // patch
    patches = images.reshape(batch_size, 3, grid, patch, grid, patch).transpose(0, 2, 4, 1, 3, 5)
    x = patches.reshape(batch_size, grid * grid, -1).astype(dtype) @ params["patch_w"].astype(dtype) + params["patch_b"]
    x = jnp.concatenate([jnp.broadcast_to(params["cls"], (batch_size, 1, model.width)).astype(dtype), x.astype(dtype)], 1)
    x = (x + params["pos"]).astype(dtype)
    x = layer_norm(blocks(model, x, params["blocks"], dtype), params["lnf_g"], params["lnf_b"], eps)
    logits = (x[:, 0] @ params["head_w"].astype(dtype)).astype(jnp.float32) + params["head_b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()


def synthetic_batch(model: Model, batch_size: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if model.kind == "gpt2":
        return {"tokens": rng.integers(0, model.vocabulary, (batch_size, model.tokens), dtype=np.int32)}
    return {"images": rng.integers(0, 256, (batch_size, 3, model.resolution, model.resolution), dtype=np.uint8),
            "labels": rng.integers(0, model.vocabulary, (batch_size,), dtype=np.int32)}


def train_step(model: Model, optimizer: optax.GradientTransformation, dtype: Any) -> Callable[..., Any]:
    def step(params: Any, state: Any, batch: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(partial(loss_of, model, dtype=dtype))(params, batch)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return jax.jit(step, donate_argnums=(0, 1))


def measure(model: Model, batch_size: int, precision: str, plan: WindowPlan, seed: int) -> Any:
    dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
    optimizer = _optimizer(model)
    params = init_params(model, jax.random.PRNGKey(seed))
    state = optimizer.init(params)
    batch = jax.device_put(synthetic_batch(model, batch_size, seed))
    step = train_step(model, optimizer, dtype)
    held = {"params": params, "state": state}

    def one() -> Any:
        held["params"], held["state"], loss = step(held["params"], held["state"], batch)
        return loss

    return time_windows(one, lambda loss: float(loss), plan)


def device_name() -> str:
    found = jax.devices()[0]
    return getattr(found, "device_kind", "") or found.platform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--batch-sizes", required=True, help="comma-separated")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16")
    parser.add_argument("--flops-from", type=Path, required=True,
                        help="an export's manifest.json: the FLOPs per sample of the trainspeed rows compared with")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--min-window-s", type=float, default=0.3)
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    arguments = parser.parse_args(argv)
    model = MODELS[arguments.model]
    try:
        manifest = json.loads(arguments.flops_from.read_text())
        flops_per_sample = float(manifest["flops_per_sample"])
        if manifest.get("workload") not in (None, model.workload):
            raise UsageError(f"--flops-from {arguments.flops_from} is an export of {manifest['workload']}, not "
                             f"{model.workload}")
        batch_sizes = [int(text) for text in arguments.batch_sizes.split(",")]
    except (OSError, ValueError, KeyError, UsageError) as error:
        print(f"jax_transformers.py: error: {error}", file=sys.stderr)
        return 2
    plan = WindowPlan(warmup_steps=2, windows=arguments.windows, min_window_s=arguments.min_window_s)
    run_id = arguments.run_id or uuid.uuid4().hex[:12]
    target = f"jax-peer:{arguments.device}:{arguments.precision}"
    for batch_size in batch_sizes:
        machine = Machine.at_start()
        base = ResultRow(run_id=run_id, timestamp=_now(), workload=model.workload, size=model.size, target=target,
                         batch_size=batch_size, status="skipped", feed="device", bytes_per_step=0,
                         flops_per_sample=flops_per_sample, device_name=device_name(), machine=machine,
                         command=shlex.join(["python", Path(sys.argv[0]).as_posix(), *sys.argv[1:]]))
        try:
            timing = measure(model, batch_size, arguments.precision, plan, arguments.seed)
        except Exception as error:  # noqa: BLE001 - every failure is a row; out of memory is told apart
            oom = any(marker in str(error) for marker in ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory"))
            row = dataclasses.replace(base, status="oom" if oom else "error", error=_first_line(error))
        else:
            row = with_flops(measured_row(base, timing, min_window_s=plan.min_window_s, warmup_steps=plan.warmup_steps),
                             flops_per_sample, Peaks(nominal=row_nominal_peak(base)))
        row = dataclasses.replace(row, machine=dataclasses.replace(machine.at_end(), torch_version=None,
                                                                   torch_threads=None, torch_interop_threads=None))
        append_row(arguments.out, row, {"peer": "jax_transformers.py", "model": arguments.model,
                                        "jax_version": jax.__version__})
        print(describe(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
