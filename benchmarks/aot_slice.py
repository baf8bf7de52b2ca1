"""A workload's data-parallel jax-family step compiled ahead of time for a TPU slice this machine
does not have: per-device memory (fits or not), XLA's collective bytes per step, and a step-time
estimate from a one-chip measurement plus the gradient's all-reduce at the slice's published
interconnect bandwidth. Nothing runs on a TPU: the compiler is libtpu's, given the slice's topology
(`jax.experimental.topologies`), as MaxText compiles its steps ahead of time on a CPU host.

    pip download --no-deps -d WHEELS libtpu==0.0.42.1 && unzip -q -o WHEELS/libtpu-*.whl -d LIBTPU
    PYTHONPATH=LIBTPU .venv/bin/python benchmarks/aot_slice.py --topology v5e:2x4 \\
        --workload mahjong --size base-fast+attn-fused-qkv+flat-tokens --target jax:jit:bf16 \\
        --batch-size-per-device 256 --one-chip-rows docs/results/tpu_mahjong_fused_bf16.jsonl \\
        --one-chip-run T023033 --out docs/results/aot_v5e_2x4.csv

(libtpu goes on PYTHONPATH for this script alone: in the project's environment JAX would take it
for a TPU.) The step is the one `train --nproc N` runs: the global batch split over the mesh's
`data` axis, the state replicated (or split, `shard-state`), one program (`placement`).

The estimate is arithmetic, not a measurement. The one-chip row gives the step's time at the
per-device batch (its compute, on one chip); the all-reduce of the program's collectives runs as a
ring over the slice's N chips, each sending and receiving 2(N-1)/N of the reduced bytes on two of
its ICI ports (v5e: 400 GB/s bidirectional per chip over 4 ports, so 2 x 50 GB/s each way). The row
gives the step with the all-reduce after the compute (no overlap) and beside it (full overlap):
the slice's rate lies between them where the ring model holds. Measuring it takes the slice.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import csv
import io
import json
import time
from typing import Any

import torch

from benchmarks.hlo_ops import parse_program
from trainspeed.jaxrt.hlo_loops import LOOP_PARTS, loop_trips

HBM_BYTES = {"v5e": 15.75 * 2**30}
"""What one chip's JAX reports usable (docs/tpu.md: 15.75 GiB on a v5e)."""
ICI_BYTES_PER_S_EACH_WAY_PER_PORT = {"v5e": 400e9 / 4 / 2}
"""Google's v5e table: 400 GB/s bidirectional inter-chip bandwidth per chip, 4 ICI ports."""

COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "collective-permute", "all-to-all")


def collective_bytes(hlo_text: str) -> dict[str, Any]:
    """Per collective kind, the ops run in one step and the bytes of their outputs: each op in the
    entry computation once, in a loop's body as many times as the loop runs (a scanned network's
    layers), an async pair once, at its start (whose result holds its operands, then its outputs)."""
    program = parse_program(hlo_text)
    trips_of = loop_trips(hlo_text)
    found: dict[str, Any] = {kind: {"ops": 0, "bytes": 0} for kind in COLLECTIVES}
    unknown: list[str] = []
    pending, seen = [(program.entry, 1)], set()
    while pending:
        name, runs = pending.pop()
        if name in seen or name not in program.members:
            continue
        seen.add(name)
        for op in (program.instructions[member] for member in program.members[name]):
            if op.opcode == "while" and (loop := LOOP_PARTS.search(op.attributes)):
                _, body = loop.groups()
                trips = trips_of.get(body)
                if trips is None:
                    unknown.append(body)
                pending.append((body, runs * (trips or 1)))
                continue
            kind = op.opcode.removesuffix("-start")
            if kind not in COLLECTIVES or op.opcode.endswith("-done"):
                continue
            outputs = op.result
            if op.opcode.endswith("-start") and kind != "all-reduce" and len(outputs) > 1:
                outputs = outputs[len(outputs) // 2:]  # (operands..., outputs...)
            found[kind]["ops"] += runs
            found[kind]["bytes"] += runs * sum(buffer.logical_bytes for buffer in outputs)
    found["loops_of_unknown_trips"] = unknown  # counted as one trip each
    return found


def one_chip_step_s(rows: Path, run: str, workload: str, size: str, target: str, batch: int) -> float:
    """The step seconds of the one-chip row of this workload, size, target and batch in the run
    whose id ends with `run`."""
    matches = [row for row in map(json.loads, rows.read_text().splitlines())
               if row.get("kind") == "bench" and row.get("status") == "ok" and row["workload"] == workload
               and row["size"] == size and row["target"] == target and row["batch_size"] == batch
               and row["run_id"].endswith(run)]
    if len(matches) != 1:
        raise SystemExit(f"aot_slice: {len(matches)} rows of {workload} {size} {target} at {batch} in run *{run} of "
                         f"{rows}; give the one-chip run that measured it (--one-chip-run)")
    return batch / matches[0]["samples_per_s"]


def compile_for_slice(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding

    from trainspeed.jaxrt import loop_trip_counts
    from trainspeed.targets import get_target
    from trainspeed.targets.jaxjit.functional import FunctionalStep, host_batch_arrays
    from trainspeed.jaxrt.placement import DATA_AXIS, Placement
    from trainspeed.workloads import get_workload, resolve_size

    topology = topologies.get_topology_desc(topology_name=args.topology, platform="tpu")
    devices = list(topology.devices)
    target = get_target(args.target)
    workload = get_workload(args.workload)
    size = resolve_size(workload, args.size)
    functional = FunctionalStep(workload.build(size, seed=0), target.spec.precision, 0, target.spec.options)
    initial = functional.initial_state()  # the step's state, traced for its shapes alone (on no device yet)
    placement = Placement(Mesh(np.array(devices), (DATA_AXIS,)), shard_state="shard-state" in target.spec.options)
    state = {name: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(
        placement.mesh, placement.state_spec(leaf.shape, leaf.dtype))) for name, leaf in initial.items()}
    global_batch = args.batch_size_per_device * len(devices)
    arrays = host_batch_arrays(workload.synthetic_batch(size, global_batch, torch.Generator().manual_seed(0)))
    batch = {key: jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=placement.batch_sharding(value.ndim))
             for key, value in arrays.items() if key != "sample_id"}
    rates = jax.ShapeDtypeStruct((functional.group_count,), "float32", sharding=placement.replicated())

    started = time.perf_counter()
    step = placement.traced_step(functional.train)  # as `train --nproc N` traces it
    compiled = jax.jit(step, donate_argnums=(0,)).lower(state, batch, rates).compile()
    compile_s = time.perf_counter() - started
    memory = compiled.memory_analysis()
    held = (memory.argument_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes
            + memory.temp_size_in_bytes)
    chip = args.topology.split(":")[0]
    return {"topology": args.topology, "devices": len(devices), "workload": args.workload, "size": args.size,
            "target": args.target, "batch_size_per_device": args.batch_size_per_device, "global_batch": global_batch,
            "compile_s": compile_s, "argument_bytes": memory.argument_size_in_bytes,
            "output_bytes": memory.output_size_in_bytes, "alias_bytes": memory.alias_size_in_bytes,
            "temp_bytes": memory.temp_size_in_bytes, "held_bytes_per_device": held,
            "hbm_bytes_per_device": HBM_BYTES[chip], "fits": held <= HBM_BYTES[chip],
            "loop_trips": loop_trip_counts(compiled), "collectives": collective_bytes(compiled.as_text()),
            "jax_version": jax.__version__}


def with_estimate(row: dict[str, Any], step_s: float, one_chip: str) -> dict[str, Any]:
    """The row with its collectives' seconds on a ring (`all_reduce_s`: each chip sends what a ring's
    all-reduce, reduce-scatter and all-gather send) and the slice's step and rate, without and with overlap."""
    chip, devices = row["topology"].split(":")[0], row["devices"]
    ring_bytes_per_s = 2 * ICI_BYTES_PER_S_EACH_WAY_PER_PORT[chip]
    share = (devices - 1) / devices
    collectives = row["collectives"]
    sent = (2 * share * collectives["all-reduce"]["bytes"]  # a ring's reduce-scatter, then its all-gather
            + share * devices * collectives["reduce-scatter"]["bytes"] + share * collectives["all-gather"]["bytes"])
    all_reduce_s = sent / ring_bytes_per_s
    serial_s, overlapped_s = step_s + all_reduce_s, max(step_s, all_reduce_s)
    return {**row, "one_chip_row": one_chip, "one_chip_step_s": step_s, "ring_bytes_per_s": ring_bytes_per_s,
            "all_reduce_s": all_reduce_s, "estimate_step_s_no_overlap": serial_s,
            "estimate_step_s_full_overlap": overlapped_s,
            "estimate_samples_per_s": [row["global_batch"] / serial_s, row["global_batch"] / overlapped_s],
            "estimate_scaling": [row["global_batch"] / serial_s / (row["batch_size_per_device"] / step_s),
                                 row["global_batch"] / overlapped_s / (row["batch_size_per_device"] / step_s)]}


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """The row as one CSV line: each collective's ops and bytes, and each estimate's two ends, a column."""
    flat_row = {key: value for key, value in row.items()
                if key not in ("collectives", "loop_trips", "estimate_samples_per_s", "estimate_scaling")}
    for kind in COLLECTIVES:
        flat_row[f"{kind}_ops"] = row["collectives"][kind]["ops"]
        flat_row[f"{kind}_bytes"] = row["collectives"][kind]["bytes"]
    flat_row["loops_of_unknown_trips"] = ";".join(row["collectives"]["loops_of_unknown_trips"])
    for key in ("estimate_samples_per_s", "estimate_scaling"):
        flat_row[f"{key}_no_overlap"], flat_row[f"{key}_full_overlap"] = row[key]
    return flat_row


def append_csv(path: Path, row: dict[str, Any]) -> None:
    """`row` appended to the CSV at `path` (its header written with the first), through a temporary
    file renamed over it, so an interrupted write leaves the rows before it."""
    from trainspeed.atomic import atomic_write_text

    text = path.read_text() if path.exists() else ""
    lines = io.StringIO()
    writer = csv.DictWriter(lines, fieldnames=list(row), lineterminator="\n")
    if not text:
        writer.writeheader()
    elif text.splitlines()[0].split(",") != list(row):
        raise SystemExit(f"aot_slice: {path} has other columns; give another --out")
    writer.writerow(row)
    atomic_write_text(path, text + lines.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="v5e:2x4")
    parser.add_argument("--workload", required=True)
    parser.add_argument("--size", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--batch-size-per-device", type=int, required=True)
    parser.add_argument("--one-chip-rows", type=Path, required=True)
    parser.add_argument("--one-chip-run", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    step_s = one_chip_step_s(args.one_chip_rows, args.one_chip_run, args.workload, args.size, args.target,
                             args.batch_size_per_device)
    row = with_estimate(compile_for_slice(args), step_s, f"{args.one_chip_rows.name} *{args.one_chip_run}")
    row["command"] = " ".join(["python", "benchmarks/aot_slice.py", *(argv if argv is not None else sys.argv[1:])])
    append_csv(args.out, flat(row))
    print(json.dumps({key: row[key] for key in ("workload", "batch_size_per_device", "held_bytes_per_device", "fits",
                                                 "collectives", "all_reduce_s", "estimate_samples_per_s",
                                                 "estimate_scaling", "compile_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
