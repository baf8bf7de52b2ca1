"""What XLA says StyleGAN3's traced step needs, per phase, on this machine's JAX, without running it:

    .venv/bin/python benchmarks/stylegan3_jax_memory.py [--sizes t256,t256+recompute-none] [--batch 2] \
        [--phases G+D,G,D] [--precision bf16] [--out docs/results/stylegan3_jax_cpu_memory.md]

Each case is traced through the jax family (`FunctionalStep.train_phases` over the phases given,
each named by its loss and stepping the optimizer of the same first letter), compiled for the local
device, and reported by `memory_analysis` (temporaries beside arguments) and `cost_analysis`
(FLOPs). Equal FLOPs with and without a recompute switch say that the compiled program recomputes
nothing; equal temporaries say that what the switch would free is not what holds the memory.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
from pathlib import Path

import torch


def measure(size: str, batch_size: int, phase_names: str, precision: str) -> dict[str, float]:
    import jax

    from trainspeed.jaxrt import compile_timed, program_costs
    from trainspeed.targets.jaxjit.functional import FunctionalStep, host_batch_arrays
    from trainspeed.workloads import get_workload
    from trainspeed.workloads.phases import StepPhase

    workload = get_workload("stylegan3")
    functional = FunctionalStep(workload.build(size, seed=0), precision, 0)
    trainable = functional.trainable
    phases = tuple(StepPhase(name, name[0]) for name in phase_names.split("+"))
    trainable.returned_loss = lambda losses: torch.stack(list(losses.values())).sum()  # any subset of the phases
    state = jax.eval_shape(functional.initial_state)
    batch = host_batch_arrays(workload.synthetic_batch(size, batch_size, torch.Generator().manual_seed(0)))
    shapes = {key: jax.ShapeDtypeStruct(value.shape, value.dtype) for key, value in batch.items()}
    rates = jax.ShapeDtypeStruct((functional.group_count,), "float32")
    step = functools.partial(functional.train_phases, phases=phases)
    compiled, compile_s = compile_timed(jax.jit(step, donate_argnums=(0,)).lower(state, shapes, rates))  # as run
    costs = program_costs(compiled)
    return {"temp_gb": costs.get("program_temp_bytes", 0.0) / 1e9,
            "argument_gb": compiled.memory_analysis().argument_size_in_bytes / 1e9,
            "tflops": costs.get("program_flops", 0.0) / 1e12, "compile_s": compile_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="t256,t256+recompute-none,t256+recompute-layer")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--phases", default="G+D,G,D")
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    parser.add_argument("--out", type=Path, default=Path("docs/results/stylegan3_jax_cpu_memory.md"))
    args = parser.parse_args(argv)
    import jax

    from trainspeed import jaxrt
    from trainspeed.atomic import atomic_write_text

    lines = [f"# StyleGAN3's traced step, compiled (not run) on {jaxrt.device_name()} ({jaxrt.versions()}), "
             f"{args.precision}, batch {args.batch}",
             "", f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start (only the "
             "compile's seconds depend on it).",
             "", f"Command: `{shlex.join(['python', 'benchmarks/stylegan3_jax_memory.py', *(sys.argv[1:] if argv is None else argv)])}`",
             "", "| size | phases | temporaries GB | arguments GB | TFLOPs per step | compile s |", "|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        for phases in args.phases.split(","):
            found = measure(size, args.batch, phases, args.precision)
            line = (f"| {size} | {phases} | {found['temp_gb']:.2f} | {found['argument_gb']:.2f} | {found['tflops']:.3f} "
                    f"| {found['compile_s']:.1f} |")
            print(line, flush=True)
            lines.append(line)
    jax.clear_caches()
    atomic_write_text(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
