"""The fused attention kernel alone against XLA's attention of the same function, on JAX's device.

For each precision and batch: the forward and the gradient of `sum(attention(qkv) * probe)` by the
Pallas kernels (`attention_kernels`) and by jax.numpy (`attention_reference`), their largest
differences relative to the reference's largest value, and each one's seconds per call (forward
and backward in one jitted program, median of `--repeats` timed runs of `--calls` calls). One
`measurement` row per (precision, batch) (benchmark "qkv-attention-kernel"), printed and written to
`--out`.

    python benchmarks/qkv_attention_kernel.py --batch-sizes 64,1024,4096 --out rows.jsonl

On a TPU this measures the kernels; elsewhere it runs them in Pallas' interpreter (`--interpret`,
small batches only: it checks the function, not the speed). It imports no torch: the kernel module
is loaded from its file, so it runs on a host with JAX only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainspeed import jaxrt  # noqa: E402 - imports no torch
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import row_line  # noqa: E402

BENCHMARK = "qkv-attention-kernel"


def kernel_module():
    path = ROOT / "trainspeed" / "targets" / "jaxjit" / "qkv_attention.py"
    spec = importlib.util.spec_from_file_location("qkv_attention_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds_per_call(function, args, calls: int, repeats: int) -> float:
    jax.block_until_ready(function(*args))
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            out = function(*args)
        jax.block_until_ready(out)
        timings.append((time.perf_counter() - start) / calls)
    return statistics.median(timings)


def measure(module, batch: int, dtype, heads: int, dim: int, tokens: int, interpret: bool, calls: int, repeats: int) -> dict:
    keys = jax.random.split(jax.random.key(batch), 2)
    qkv = jax.random.normal(keys[0], (batch, tokens, 3 * heads * dim), jnp.float32).astype(dtype)
    probe = jax.random.normal(keys[1], (batch, tokens, heads * dim), jnp.float32).astype(dtype)

    def value_and_gradient(attention):
        def loss(x):
            return jnp.sum(attention(x).astype(jnp.float32) * probe.astype(jnp.float32))

        return jax.jit(lambda x: (attention(x), jax.grad(loss)(x)))

    kernel = value_and_gradient(lambda x: module.attention_kernels(x, heads, interpret=interpret))
    reference = value_and_gradient(lambda x: module.attention_reference(x, heads))
    (out_k, grad_k), (out_r, grad_r) = kernel(qkv), reference(qkv)

    def relative(a, b):
        return float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))) / jnp.max(jnp.abs(b.astype(jnp.float32))))

    row = {"batch": batch, "precision": jnp.dtype(dtype).name, "heads": heads, "head_dim": dim, "tokens": tokens,
           "device": jax.devices()[0].device_kind, "jax_versions": jaxrt.versions(), "interpret": interpret,
           "samples_per_block": module.samples_per_block(batch, tokens, 3 * heads * dim, jnp.dtype(dtype).itemsize),
           "output_rel_diff": relative(out_k, out_r), "gradient_rel_diff": relative(grad_k, grad_r)}
    if not interpret:
        row["kernel_s"] = seconds_per_call(kernel, (qkv,), calls, repeats)
        row["xla_s"] = seconds_per_call(reference, (qkv,), calls, repeats)
        row["kernel_speedup"] = row["xla_s"] / row["kernel_s"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,1024,4096")
    parser.add_argument("--precisions", default="bfloat16,float32")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=34)
    parser.add_argument("--interpret", action="store_true")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    module = kernel_module()
    command = shlex.join(["python", "benchmarks/qkv_attention_kernel.py", *sys.argv[1:]])
    machine = Machine.at_start()
    lines = []
    for precision in args.precisions.split(","):
        for batch in (int(size) for size in args.batch_sizes.split(",")):
            values = measure(module, batch, jnp.dtype(precision), args.heads, args.head_dim, args.tokens,
                             args.interpret, args.calls, args.repeats)
            print(json.dumps(values), flush=True)
            lines.append(row_line(MeasurementRow.of(BENCHMARK, values, command, machine)) + "\n")
            if args.out:  # each row as it is measured: a call cut off at its limit keeps the ones before
                Path(args.out).write_text("".join(lines))


if __name__ == "__main__":
    sys.exit(main())
