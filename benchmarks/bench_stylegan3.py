"""StyleGAN3's training step per size, batch size and memory/speed trade-off, each in a fresh process.

    python benchmarks/bench_stylegan3.py [--target cpu:eager:fp32] [--threads 2]
        [--cases small-t64:4,small-t64:8 ...] [--variants activation,layer,none,grouped]
        [--windows 3] [--min-window-s 0.5] [--out results/stylegan3.jsonl]

A case is SIZE:BATCH; a variant is a memory/speed trade-off of the same maths, a name of `VARIANTS`
(`activation`: the size as it is, activation recompute; `none` and `layer`: other recompute modes;
`grouped` modulated convolution; `matmul` FIR resampling; `triton` the fused filtered leaky ReLU;
`channels-last`), several joined by `+`, e.g. `triton+channels-last`. A variant is the size's own
switches (`tiny-t+fir-matmul`), so the same measurement is `trainspeed bench --workload stylegan3
--size tiny-t+fir-matmul`; cuDNN's algorithm search is the target's switch
(`--target cuda:eager:bf16:cudnn-benchmark`).

Each (case, variant) runs `trainspeed bench`'s own sweep (the same first step, warm-up and timed
windows, the same row) in a fresh process, so that process's peak host memory (ru_maxrss) is the
case's own. The row gets the fields of `StyleGAN3Extras` beside the bench's: the variant, s/kimg,
the peak host memory, parameter counts and which filtered leaky ReLU runs on the target.

On a GPU (T-256 at batch 4, 8, 32):
    python benchmarks/bench_stylegan3.py --target cuda:compile:bf16 \
        --cases t256:4,t256:8,t256:32 --variants activation,matmul,layer --windows 5 \
        --out docs/results/stylegan3_h200.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import resource
import shlex
import sys
import tempfile
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's trainspeed, in the measuring processes too

GIB = 2**30
VARIANTS = {"activation": "", "none": "recompute-none", "layer": "recompute-layer", "grouped": "grouped",
            "matmul": "fir-matmul", "triton": "triton-lrelu", "channels-last": "channels-last"}
"""A variant's name -> the StyleGAN3 size switch it is (`trainspeed.workloads.stylegan3.configs`)."""


@dataclass(frozen=True)
class Case:
    size: str
    batch_size: int
    variant: str

    @property
    def sized(self) -> str:
        """The size with the variant's switches: what `trainspeed bench --size` takes."""
        switches = [VARIANTS[part] for part in self.variant.split("+") if VARIANTS[part]]
        return "+".join([self.size, *switches])


@dataclass(frozen=True)
class StyleGAN3Extras:
    """What a row holds beyond trainspeed's bench row."""

    variant: str
    resolution: int
    s_per_kimg: float | None
    peak_host_rss_bytes: int
    """The measuring process's peak resident memory: this case's own (one case per process)."""
    generator_parameters: int
    discriminator_parameters: int
    lrelu_path: str
    """Which kernels run the filtered leaky ReLU on the target: "triton" or "plain"."""
    lrelu_note: str | None


def measure(case: Case, target: str, threads: int, windows: int, min_window_s: float, run_id: str,
            command: str) -> tuple[Any, dict]:
    """One (case, variant) in this (fresh) process: the bench row and its extras."""
    from trainspeed.bench.config import BenchConfig, TimingPlan
    from trainspeed.bench.sweep import run_sweep
    from trainspeed.targets import get_target
    from trainspeed.workloads.stylegan3.configs import get_config
    from trainspeed.workloads.stylegan3.workload import build_trainable

    with tempfile.TemporaryDirectory() as scratch:
        (row,) = run_sweep(BenchConfig(
            workload="stylegan3", size=case.sized, targets=[target], batch_sizes=[case.batch_size],
            out=Path(scratch) / "row.jsonl", plan=TimingPlan(warmup_steps=1, windows=windows, min_window_s=min_window_s),
            threads=threads, run_id=run_id, command=command))
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    host = build_trainable(get_config(case.sized))
    lrelu_path = host.networks["G"].synthesis.select_kernels(get_target(target).device)
    notes = [layer.lrelu_note for layer in host.networks["G"].synthesis.layers if layer.lrelu_note]
    extras = StyleGAN3Extras(
        variant=case.variant, resolution=get_config(case.sized).resolution,
        s_per_kimg=round(1000 / row.samples_per_s, 1) if row.samples_per_s else None, peak_host_rss_bytes=peak_rss,
        generator_parameters=sum(p.numel() for p in host.networks["G"].parameters()),
        discriminator_parameters=sum(p.numel() for p in host.networks["D"].parameters()),
        lrelu_path=lrelu_path, lrelu_note=notes[0] if notes else None)
    return row, dataclasses.asdict(extras)


def parse_cases(cases: str, variants: str) -> list[Case]:
    parsed = []
    for item in cases.split(","):
        size, _, batch = item.strip().partition(":")
        for variant in variants.split(","):
            unknown = [part for part in variant.strip().split("+") if part not in VARIANTS]
            if unknown:
                raise SystemExit(f"bench_stylegan3: unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
            parsed.append(Case(size, int(batch), variant.strip()))
    return parsed


def run_isolated(case: Case, target: str, threads: int, windows: int, min_window_s: float, run_id: str,
                 command: str) -> tuple[Any, dict]:
    """A fresh process per case: its ru_maxrss is this case's peak, and nothing is shared."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(measure, case, target, threads, windows, min_window_s, run_id, command).result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="cpu:eager:fp32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cases", default="tiny-t:4,tiny-t:8,tiny-t:32,small-t64:4")
    parser.add_argument("--variants", default="activation")
    parser.add_argument("--windows", type=int, default=3, help="timed windows of at least --min-window-s each")
    parser.add_argument("--min-window-s", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=Path("results/stylegan3.jsonl"))
    args = parser.parse_args(argv)

    from trainspeed.bench.results import append_row, check_results_file

    check_results_file(args.out)
    run_id = uuid.uuid4().hex[:12]
    command = shlex.join(["python", "benchmarks/bench_stylegan3.py", *(sys.argv[1:] if argv is None else argv)])
    for case in parse_cases(args.cases, args.variants):
        row, extras = run_isolated(case, args.target, args.threads, args.windows, args.min_window_s, run_id, command)
        append_row(args.out, row, extras)
        memory = f", peak device {row.peak_memory_bytes / GIB:.2f} GiB" if row.peak_memory_bytes else ""
        print(f"{case.sized:>24} b={case.batch_size:<3} {row.status}"
              + (f": {row.error}" if row.error else
                 f" {row.samples_per_s:8.3f} img/s {extras['s_per_kimg']:9.1f} s/kimg, peak RSS "
                 f"{extras['peak_host_rss_bytes'] / GIB:.2f} GiB, lrelu {extras['lrelu_path']}{memory}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
