"""The fused Triton filtered leaky ReLU on a device: agreement with the plain ops and time per layer.

    python3 benchmarks/check_triton_lrelu.py [--size t256] [--batch 4] [--dtypes bf16,fp32]
        [--device cuda] [--max-channels N] [--max-layers N] [--repeats 5] [--out results/triton_lrelu.jsonl]

For every synthesis layer of the size (its input size, filters, factors, padding, clamp), one
random input and one random output gradient are run through the plain ops and the fused kernels.
Errors are relative (Frobenius norm) to the plain ops in fp32 on the same device; the plain ops'
own error in the same dtype is printed beside the fused one for scale. Times are forward plus
backward, the median of `--repeats` after one warm-up, synced; the plain ops run without
recomputation here (training recomputes their forward once more in backward).

Exit code 1 when a fused result is further from fp32 than 4x the plain ops' error plus 2^-10,
so a device run flags a wrong kernel before its training rows are read. On a host without CUDA
run it with TRITON_INTERPRET=1 --device cpu and small --max-channels (the interpreter is slow).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _relative(actual, expected) -> float:
    actual, expected = actual.detach().float(), expected.detach().float()
    return float((actual - expected).norm() / expected.norm().clamp_min(1e-30))


def _timed(function, device, repeats: int) -> float:
    """Median milliseconds of `function()` over `repeats` runs after one warm-up."""
    import torch

    function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="t256")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-channels", type=int, default=None, help="use at most this many channels per layer")
    parser.add_argument("--max-layers", type=int, default=None, help="check only the first N layers")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/triton_lrelu.jsonl"))
    args = parser.parse_args(argv)

    import torch

    from trainspeed.atomic import append_line
    from trainspeed.workloads.stylegan3 import triton_lrelu
    from trainspeed.workloads.stylegan3.configs import get_config
    from trainspeed.workloads.stylegan3.generator import SynthesisNetwork
    from trainspeed.workloads.stylegan3.layout import synthesis_layers
    from trainspeed.workloads.stylegan3.ops import filtered_lrelu

    device = torch.device(args.device)
    # the fp32 reference in true fp32 (cuDNN would use TF32 by default), set as the CUDA target does
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    config = get_config(args.size)
    torch.manual_seed(0)
    layers = [(layer, spec) for layer, spec in zip(SynthesisNetwork(config).layers, synthesis_layers(config))
              if not layer.is_torgb][: args.max_layers]  # fmt: skip
    failures = 0
    for index, (layer, spec) in enumerate(layers):
        reason = triton_lrelu.unavailable_reason(device, layer.up_filter, layer.down_filter)
        if reason:
            print(f"layer {index}: fused kernel unavailable: {reason}")
            failures += 1
            continue
        channels = min(spec.after.channels, args.max_channels or spec.after.channels)
        side = spec.before.size + layer.conv_kernel - 1
        generator = torch.Generator().manual_seed(index)
        x32 = torch.randn(args.batch, channels, side, side, generator=generator).to(device) * 3
        bias32 = torch.randn(channels, generator=generator).to(device)
        filters = (layer.up_filter.to(device), layer.down_filter.to(device))
        common = dict(up=layer.up, down=layer.down, padding=layer.padding, gain=layer.gain, slope=layer.slope,
                      clamp=layer.conv_clamp)  # fmt: skip

        def plain(x, bias):
            return filtered_lrelu(x, *filters, bias, **common)

        def fused(x, bias):
            return triton_lrelu.filtered_lrelu(x, bias, layer.up_taps, layer.down_taps, common["up"], common["down"],
                                               common["padding"], common["gain"], common["slope"], common["clamp"])  # fmt: skip

        def run(function, dtype, grad_y):
            x = x32.to(dtype).requires_grad_()
            bias = bias32.clone().requires_grad_()
            y = function(x, bias)
            grad_x, grad_bias = torch.autograd.grad(y, (x, bias), grad_y.to(y.dtype))
            return y, grad_x, grad_bias

        with torch.no_grad():
            out_shape = plain(x32, bias32).shape
        grad_y32 = torch.randn(out_shape, generator=generator).to(device)
        reference = run(plain, torch.float32, grad_y32)
        for name in args.dtypes.split(","):
            dtype = getattr(torch, DTYPES[name])
            plain_out = run(plain, dtype, grad_y32)
            fused_out = run(fused, dtype, grad_y32)
            errors = {
                what: (_relative(f, r), _relative(p, r))
                for what, f, p, r in zip(("y", "grad_x", "grad_bias"), fused_out, plain_out, reference)
            }
            bad = [what for what, (f, p) in errors.items() if f > 4 * p + 2**-10]
            failures += bool(bad)
            plain_ms = _timed(lambda: run(plain, dtype, grad_y32), device, args.repeats)
            fused_ms = _timed(lambda: run(fused, dtype, grad_y32), device, args.repeats)
            row = {
                "layer": index, "size": args.size, "batch": args.batch, "channels": channels, "input": side,
                "up": layer.up, "down": layer.down, "output": spec.after.size, "dtype": name, "device": str(device),
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                **{f"{what}_error_fused": f for what, (f, _) in errors.items()},
                **{f"{what}_error_plain": p for what, (_, p) in errors.items()},
                "plain_fwd_bwd_ms": round(plain_ms, 3), "fused_fwd_bwd_ms": round(fused_ms, 3),
                "speedup": round(plain_ms / fused_ms, 3), "ok": not bad, "torch_version": torch.__version__,
            }  # fmt: skip
            append_line(args.out, json.dumps(row))
            print(
                f"layer {index:2d} {channels:3d}ch {side:3d}->{spec.after.size:3d} up {layer.up} {name}: "
                f"y err {errors['y'][0]:.2e} (plain {errors['y'][1]:.2e}) grad_x err {errors['grad_x'][0]:.2e} "
                f"(plain {errors['grad_x'][1]:.2e}) | plain {plain_ms:8.2f} ms fused {fused_ms:8.2f} ms "
                f"x{plain_ms / fused_ms:.2f}{'  MISMATCH ' + ','.join(bad) if bad else ''}",
                flush=True,
            )
    print(f"{len(layers)} layers checked, {failures} problems; rows in {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
