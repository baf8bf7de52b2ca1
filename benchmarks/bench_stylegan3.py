"""StyleGAN3 training speed and peak memory per size, batch size and memory trade-off.

    .venv/bin/python benchmarks/bench_stylegan3.py [--target cpu:eager:fp32] [--threads 2]
        [--cases small-t64:4,small-t64:8 ...] [--variants activation,layer,none,grouped]
        [--steps 2] [--out results/stylegan3.jsonl]

A case is SIZE:BATCH; a variant is a memory/speed trade-off of the same maths (`recompute` mode
none/activation/layer; `grouped` modulated convolution or `matmul` FIR resampling, both with
activation recompute), optionally joined by `+` with `channels-last` (NHWC tensors) and `triton`
(the fused Triton filtered leaky ReLU where Triton and CUDA are), e.g. `activation+channels-last`
or `triton+channels-last`. cuDNN's algorithm search is the target's switch
(`--target cuda:eager:bf16:cudnn-benchmark`). Each row says which filtered leaky ReLU ran
(`lrelu_path`, and `lrelu_note` when the Triton one was asked for but could not run), whether
tensors were channels-last and whether cuDNN searched. Every (case, variant) runs in a
fresh process, so its peak host memory (ru_maxrss) is its own; on CUDA the row also has the
allocator's peak. Each run does one untimed first step (it includes R1 and any compilation), then
`--steps` steps timed one by one with a device sync after each (no R1 among them: R1 adds about
1/16 of a D step). The row reports the median step, images/s and s/kimg, plus the model FLOPs
counted per image (torch's per-op formulas, see workload.counted_flops_per_image).

On a GPU (T-256 at batch 4, 8, 32, best target):
    .venv/bin/python benchmarks/bench_stylegan3.py --target cuda:compile:bf16 \
        --cases t256:4,t256:8,t256:32 --variants activation,matmul,layer --steps 5 \
        --out docs/results/stylegan3_h200.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import resource
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

GIB = 2**30


@dataclass(frozen=True)
class Case:
    size: str
    batch_size: int
    variant: str


@dataclass(frozen=True)
class StyleGAN3Row:
    size: str
    resolution: int
    batch_size: int
    variant: str
    target: str
    device_name: str
    threads: int
    first_step_s: float
    step_s: float
    step_s_range: tuple[float, float]
    timed_steps: int
    images_per_s: float
    s_per_kimg: float
    flops_per_image: float
    achieved_tflops: float
    peak_host_rss_gib: float
    host_rss_before_step_gib: float
    peak_device_memory_gib: float | None
    generator_parameters: int
    discriminator_parameters: int
    load_average_1min: float
    torch_version: str
    timestamp: str
    lrelu_path: str = "plain"
    """Which kernels ran the filtered leaky ReLU: "triton", "plain" or "mixed"."""
    lrelu_note: str | None = None
    channels_last: bool = False
    cudnn_benchmark: bool = False


def _rss_gib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / GIB


VARIANT_PARTS = {
    "none": {"recompute": "none"},
    "activation": {"recompute": "activation"},
    "layer": {"recompute": "layer"},
    "grouped": {"recompute": "activation", "grouped_modconv": True},
    "matmul": {"recompute": "activation", "fir_matmul": True},
    "channels-last": {"channels_last": True},
    "triton": {"lrelu_kernel": "triton"},
}


def _variant_config(size: str, variant: str):
    from trainspeed.workloads.stylegan3.configs import get_config

    config = get_config(size)
    for part in variant.split("+"):
        if part not in VARIANT_PARTS:
            raise ValueError(f"unknown variant part {part!r} in {variant!r}; choose from {', '.join(VARIANT_PARTS)}")
        config = dataclasses.replace(config, **VARIANT_PARTS[part])
    return config


def measure(case: Case, target_spec: str, threads: int, steps: int) -> StyleGAN3Row:
    """One (case, variant) in this (fresh) process."""
    import torch

    torch.set_num_threads(threads)
    from trainspeed.targets import get_target
    from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload, build_trainable, counted_flops_per_image

    config = _variant_config(case.size, case.variant)
    target = get_target(target_spec)
    trainable = target.prepare(build_trainable(config, seed=0))
    # Counting runs a backward pass; XLA's device must exist before the process's first backward
    # (autograd sizes its per-device queues then), so count only after the target is prepared.
    flops = counted_flops_per_image(config)
    batch = target.move_batch(StyleGAN3Workload().synthetic_batch(case.size, case.batch_size, torch.Generator().manual_seed(0)))
    rss_before = _rss_gib()
    target.reset_peak_memory()

    start = time.perf_counter()
    target.run_step(trainable, batch)
    target.sync()
    first_step_s = time.perf_counter() - start
    step_times = []
    for _ in range(steps):
        start = time.perf_counter()
        target.run_step(trainable, batch)
        target.sync()
        step_times.append(time.perf_counter() - start)

    timed = step_times or [first_step_s]  # --steps 0: the first step is all there is (large sizes on CPU)
    step_s = statistics.median(timed)
    peak_device = target.peak_memory_bytes()
    return StyleGAN3Row(
        size=case.size,
        resolution=config.resolution,
        batch_size=case.batch_size,
        variant=case.variant,
        target=target_spec,
        device_name=target.device_name(),
        threads=torch.get_num_threads(),
        first_step_s=round(first_step_s, 3),
        step_s=round(step_s, 3),
        step_s_range=(round(min(timed), 3), round(max(timed), 3)),
        timed_steps=steps,
        images_per_s=round(case.batch_size / step_s, 4),
        s_per_kimg=round(1000 * step_s / case.batch_size, 1),
        flops_per_image=flops,
        achieved_tflops=round(flops * case.batch_size / step_s / 1e12, 4),
        peak_host_rss_gib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
        host_rss_before_step_gib=round(rss_before, 3),
        peak_device_memory_gib=round(peak_device / GIB, 3) if peak_device is not None else None,
        generator_parameters=sum(p.numel() for p in trainable.networks["G"].parameters()),
        discriminator_parameters=sum(p.numel() for p in trainable.networks["D"].parameters()),
        load_average_1min=round(os.getloadavg()[0], 2),
        torch_version=torch.__version__,
        timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        lrelu_path=trainable.lrelu_path,
        lrelu_note=next((layer.lrelu_note for layer in trainable.networks["G"].synthesis.layers if layer.lrelu_note), None),
        channels_last=config.channels_last,
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
    )


def parse_cases(cases: str, variants: str) -> list[Case]:
    parsed = []
    for item in cases.split(","):
        size, _, batch = item.strip().partition(":")
        for variant in variants.split(","):
            parsed.append(Case(size, int(batch), variant.strip()))
    return parsed


def run_isolated(case: Case, target: str, threads: int, steps: int) -> StyleGAN3Row:
    """A fresh process per case: its ru_maxrss is this case's peak, and nothing is shared."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(measure, case, target, threads, steps).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="cpu:eager:fp32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cases", default="tiny-t:4,tiny-t:8,tiny-t:32,small-t64:4")
    parser.add_argument("--variants", default="activation")
    parser.add_argument("--steps", type=int, default=2, help="timed steps after the first (0: report the first)")
    parser.add_argument("--out", type=Path, default=Path("results/stylegan3.jsonl"))
    args = parser.parse_args()

    from trainspeed.atomic import append_line

    for case in parse_cases(args.cases, args.variants):
        try:
            row = run_isolated(case, args.target, args.threads, args.steps)
        except Exception as error:  # an OOM or a crash in one case is a result, not the end
            print(json.dumps({"case": asdict(case), "error": str(error).splitlines()[0]}), flush=True)
            continue
        append_line(args.out, json.dumps(asdict(row)))
        print(
            f"{row.size:>10} b={row.batch_size:<3} {row.variant:<10} {row.target} lrelu={row.lrelu_path} step {row.step_s:8.3f}s "
            f"{row.images_per_s:8.3f} img/s {row.s_per_kimg:9.1f} s/kimg peak RSS {row.peak_host_rss_gib:6.2f} GiB "
            f"(before step {row.host_rss_before_step_gib:.2f}) {row.achieved_tflops * 1000:.1f} GFLOP/s load {row.load_average_1min}"
            f" peak device {row.peak_device_memory_gib} GiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
