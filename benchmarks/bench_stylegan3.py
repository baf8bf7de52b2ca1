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
1/16 of a D step). Rows are trainspeed's bench rows (`trainspeed.bench.results.ResultRow`: each
timed step is a window of one step, samples/s is images/s of the median step, `peak_memory_bytes`
the device allocator's peak, a compilation among the timed steps makes the row `invalid`, an
out-of-memory case is an `oom` row), plus the fields of `StyleGAN3Row` (the variant, s/kimg, the
process's peak host memory, parameter counts). The model FLOPs are counted per image (torch's per-op
formulas, see workload.counted_flops_per_image). Rows written before they were bench rows (images/s,
memory in GiB) are still read by `trainspeed report`.

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
import shlex
import statistics
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's trainspeed, in the measuring processes too

GIB = 2**30


@dataclass(frozen=True)
class Case:
    size: str
    batch_size: int
    variant: str


@dataclass(frozen=True)
class StyleGAN3Row:
    """What a row holds beyond trainspeed's bench row fields."""

    variant: str
    resolution: int
    s_per_kimg: float | None
    timed_steps: int
    peak_host_rss_bytes: int
    host_rss_before_step_bytes: int | None
    generator_parameters: int | None
    discriminator_parameters: int | None
    load_average_1min: float
    lrelu_path: str = "plain"
    """Which kernels ran the filtered leaky ReLU: "triton", "plain" or "mixed"."""
    lrelu_note: str | None = None
    channels_last: bool = False
    cudnn_benchmark: bool = False


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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


def _base_row(case: Case, target_spec: str, run_id: str, command: str) -> dict:
    """The row's fields before measuring: an `error` row until a measurement replaces it."""
    from trainspeed.bench.environment import Environment
    from trainspeed.bench.results import ResultRow

    return dataclasses.asdict(ResultRow(
        run_id=run_id, timestamp=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), workload="stylegan3",
        size=case.size, target=target_spec, batch_size=case.batch_size, status="error", feed="device", bytes_per_step=0,
        command=command, **dataclasses.asdict(Environment.capture()),
    ))


def measure(case: Case, target_spec: str, threads: int, steps: int, run_id: str, command: str) -> dict:
    """One (case, variant) in this (fresh) process: a bench row plus StyleGAN3Row's fields."""
    import torch

    torch.set_num_threads(threads)
    from trainspeed.targets import get_target
    from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload, build_trainable, counted_flops_per_image

    row = _base_row(case, target_spec, run_id, command)
    config = _variant_config(case.size, case.variant)
    target = get_target(target_spec)
    row.update(device_name=target.device_name(), threads=torch.get_num_threads())
    try:
        trainable = target.prepare(build_trainable(config, seed=0))
        # Counting runs a backward pass; XLA's device must exist before the process's first backward
        # (autograd sizes its per-device queues then), so count only after the target is prepared.
        flops = counted_flops_per_image(config)
        batch = target.move_batch(StyleGAN3Workload().synthetic_batch(case.size, case.batch_size, torch.Generator().manual_seed(0)))
        rss_before = _rss_bytes()
        target.reset_peak_memory()

        start = time.perf_counter()
        target.run_step(trainable, batch)
        target.sync()
        first_step_s = time.perf_counter() - start
        compiles_before = target.compile_count()
        step_times = []
        for _ in range(steps):
            start = time.perf_counter()
            target.run_step(trainable, batch)
            target.sync()
            step_times.append(time.perf_counter() - start)
        compiles = target.compile_count() - compiles_before
    except Exception as error:  # an out-of-memory or a crash in one case is a result, not the end
        lines = str(error).strip().splitlines()
        row.update(status="oom" if target.is_oom(error) else "error", error=f"{type(error).__name__}: {lines[0] if lines else ''}"[:500])
        return {**row, **dataclasses.asdict(StyleGAN3Row(
            variant=case.variant, resolution=config.resolution, s_per_kimg=None, timed_steps=steps,
            peak_host_rss_bytes=_peak_rss_bytes(), host_rss_before_step_bytes=None, generator_parameters=None,
            discriminator_parameters=None, load_average_1min=round(os.getloadavg()[0], 2)))}

    timed = step_times or [first_step_s]  # --steps 0: the first step is all there is (large sizes on CPU)
    step_s = statistics.median(timed)
    row.update(
        status="ok" if compiles == 0 else "invalid",
        samples_per_s=case.batch_size / step_s,
        samples_per_s_min=case.batch_size / max(timed),
        samples_per_s_max=case.batch_size / min(timed),
        step_time_s=step_s,
        first_step_s=first_step_s,
        windows=len(timed),
        steps_per_window=1,
        window_s=timed,
        warmup_steps=0,
        compiles_in_windows=compiles,
        peak_memory_bytes=target.peak_memory_bytes(),
        flops_per_sample=flops,
        achieved_tflops=flops * case.batch_size / step_s / 1e12,
    )
    return {**row, **dataclasses.asdict(StyleGAN3Row(
        variant=case.variant,
        resolution=config.resolution,
        s_per_kimg=round(1000 * step_s / case.batch_size, 1),
        timed_steps=steps,
        peak_host_rss_bytes=_peak_rss_bytes(),
        host_rss_before_step_bytes=rss_before,
        generator_parameters=sum(p.numel() for p in trainable.networks["G"].parameters()),
        discriminator_parameters=sum(p.numel() for p in trainable.networks["D"].parameters()),
        load_average_1min=round(os.getloadavg()[0], 2),
        lrelu_path=trainable.lrelu_path,
        lrelu_note=next((layer.lrelu_note for layer in trainable.networks["G"].synthesis.layers if layer.lrelu_note), None),
        channels_last=config.channels_last,
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
    ))}


def parse_cases(cases: str, variants: str) -> list[Case]:
    parsed = []
    for item in cases.split(","):
        size, _, batch = item.strip().partition(":")
        for variant in variants.split(","):
            parsed.append(Case(size, int(batch), variant.strip()))
    return parsed


def run_isolated(case: Case, target: str, threads: int, steps: int, run_id: str, command: str) -> dict:
    """A fresh process per case: its ru_maxrss is this case's peak, and nothing is shared. A process
    that dies is an `error` row."""
    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            return pool.submit(measure, case, target, threads, steps, run_id, command).result()
    except Exception as error:  # noqa: BLE001 - the measuring process died (killed, out of host memory)
        row = _base_row(case, target, run_id, command)
        return {**row, "error": f"{type(error).__name__}: {str(error).strip()[:400]}", "variant": case.variant}


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

    run_id = uuid.uuid4().hex[:12]
    command = shlex.join(["python", Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    for case in parse_cases(args.cases, args.variants):
        row = run_isolated(case, args.target, args.threads, args.steps, run_id, command)
        append_line(args.out, json.dumps(row))
        if row["status"] not in ("ok", "invalid"):
            print(f"{row['size']:>10} b={row['batch_size']:<3} {case.variant:<10} {row['status']}: {row['error']}", flush=True)
            continue
        device = row["peak_memory_bytes"]
        print(
            f"{row['size']:>10} b={row['batch_size']:<3} {case.variant:<10} {row['status']} lrelu={row['lrelu_path']} "
            f"step {row['step_time_s']:8.3f}s "
            f"{row['samples_per_s']:8.3f} img/s {row['s_per_kimg']:9.1f} s/kimg peak RSS {row['peak_host_rss_bytes'] / GIB:6.2f} GiB "
            f"(before step {row['host_rss_before_step_bytes'] / GIB:.2f}) {row['achieved_tflops'] * 1000:.1f} GFLOP/s "
            f"load {row['load_average_1min']}" + (f" peak device {device / GIB:.2f} GiB" if device is not None else ""),
            flush=True,
        )

if __name__ == "__main__":
    main()
