"""The Mahjong policy's attention at 34 tokens: which SDPA backend PyTorch picks, and each one's time.

    python3 benchmarks/mahjong_attention.py [--device cuda] [--batch 4096] [--size base]
        [--dtype bf16] [--repeats 20] [--out results/mahjong_attention.jsonl]

One attention call of the size's shape (batch, heads, 34 tokens, head width), forward and
backward, timed for: PyTorch's own pick ("sdpa"), each backend forced with sdpa_kernel (math,
flash, efficient, cudnn), and the explicit form (q @ k^T, softmax, @ v). A backend that cannot
run this shape here gets a row with its error. The row of "sdpa" names the backend it ran, read
from the ATen op the profiler saw. These are the `attention` choices of the policy's config.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

OPS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
}


def _ran_backend(function) -> str:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        function()
    names = {event.key for event in prof.key_averages()}
    found = sorted({backend for op, backend in OPS.items() for name in names if op in name})
    return "+".join(found) or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--size", default="base")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("results/mahjong_attention.jsonl"))
    args = parser.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from trainspeed.atomic import append_line
    from trainspeed.workloads.mahjong.model import NUM_TILE_TYPES, SDPA_BACKENDS, policy_config

    config = policy_config(args.size)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    head_width = config.width // config.heads
    shape = (args.batch, config.heads, NUM_TILE_TYPES, head_width)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=generator).to(device, dtype).requires_grad_() for _ in range(3))
    grad = torch.randn(shape, generator=generator).to(device, dtype)
    flops = 3 * 2 * 2 * args.batch * config.heads * NUM_TILE_TYPES**2 * head_width  # fwd + bwd (2x)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def explicit():
        weights = ((q @ k.transpose(-2, -1)) * head_width**-0.5).softmax(dim=-1)
        return weights @ v

    def forced(backend):
        def attend():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)

        return attend

    kinds = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v), "explicit": explicit}
    kinds.update({name: forced(backend) for name, backend in SDPA_BACKENDS.items()})
    print(f"attention {shape} {args.dtype} on {device}")
    for attend in kinds.values():  # every kind once before any is timed: one-time set-up is nobody's
        try:
            torch.autograd.grad(attend(), (q, k, v), grad)
        except RuntimeError:
            pass
    sync()
    for kind, attend in kinds.items():
        row = {"kind": kind, "batch": args.batch, "heads": config.heads, "tokens": NUM_TILE_TYPES,
               "head_width": head_width, "dtype": args.dtype, "device": str(device),
               "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "torch_version": torch.__version__}  # fmt: skip

        def step():
            out = attend()
            torch.autograd.grad(out, (q, k, v), grad)

        try:
            step()
            sync()
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                step()
                sync()
                times.append(time.perf_counter() - start)
            seconds = statistics.median(times)
            row.update(ms=round(seconds * 1000, 4), tflops=round(flops / seconds / 1e12, 3))
            if kind == "sdpa":
                row["ran"] = _ran_backend(step)
        except RuntimeError as error:
            row["error"] = str(error).strip().splitlines()[0][:300]
        append_line(args.out, json.dumps(row))
        result = f"{row['ms']:9.3f} ms {row['tflops']:8.2f} TFLOP/s" if "ms" in row else f"unavailable: {row['error']}"
        print(f"{kind:>15} {result}{'  (ran ' + row['ran'] + ')' if 'ran' in row else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
