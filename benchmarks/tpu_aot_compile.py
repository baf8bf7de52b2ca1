"""Compile an exported folder's training programs for a TPU v5e on a machine without the chip, and
report what XLA's TPU compiler says of each: its compile seconds, temporaries, arguments and FLOPs.

    PYTHONPATH=LIBTPU_SITE .venv/bin/python benchmarks/tpu_aot_compile.py EXPORTED --batch 8 \
        [--topology v5e:1x1] [--out RESULT.md]

LIBTPU_SITE holds the `libtpu` wheel the chip's host runs (`pip install --target DIR libtpu==...`);
JAX then describes the chip (`jax.experimental.topologies`) and compiles for it here. This answers,
without device time, whether a program fits the chip's HBM and how long its compile takes, which a
call on the chip can only bound by its own limit. Compile seconds depend on this machine's CPU
and load (recorded in the rows), not on the chip.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.errors import UsageError  # noqa: E402
from trainspeed.exported.folder import read_checked, read_manifest  # noqa: E402


def tpu_device(topology: str):
    from jax.experimental import topologies

    return topologies.get_topology_desc(topology, "tpu", chips_per_host_bounds=[1, 1, 1]).devices[0]


def compile_program(name: str, artifact: bytes, device) -> dict:
    """One artifact's `call`, lowered for `device` at the artifact's own input shapes, compiled:
    XLA's count of its temporaries and arguments in bytes and of its FLOPs, and the same in the
    page's units (GB, TFLOPs; rounded, so a small program's read 0)."""
    import jax
    from jax.sharding import SingleDeviceSharding

    from trainspeed.jaxrt import compile_timed, program_costs

    exported = jax.export.deserialize(bytearray(artifact))
    sharding = SingleDeviceSharding(device)
    leaves = [jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding) for aval in exported.in_avals]
    args, kwargs = jax.tree_util.tree_unflatten(exported.in_tree, leaves)
    compiled, compile_s = compile_timed(jax.jit(exported.call, donate_argnums=(0,)).lower(*args, **kwargs))
    costs = program_costs(compiled)
    temp, arguments = int(costs.get("program_temp_bytes", 0)), int(costs.get("program_argument_bytes", 0))
    flops = costs.get("program_flops", 0.0)
    return {"program": name, "compile_s": round(compile_s, 1), "temp_bytes": temp, "argument_bytes": arguments,
            "flops": flops, "temp_gb": round(temp / 1e9, 3), "argument_gb": round(arguments / 1e9, 3),
            "tflops": round(flops / 1e12, 4)}


def heartbeat(name: str, started: float, done: threading.Event) -> None:
    """A line every 30 s while a compile runs, so a cut-off run still says how far it got."""
    while not done.wait(30.0):
        print(f"  {name}: compiling for {time.perf_counter() - started:.0f} s", flush=True)


def markdown(rows: list[dict]) -> str:
    """The rows as a page: what was compiled, on what machine, and the command."""
    first = rows[0]
    lines = [f"# {first['size']} ({first['precision']}, batch {first['batch']}) compiled for a TPU {first['topology']} "
             "without the chip", "",
             f"Machine: {first['host_cpus']} CPUs, load average {first['load_1m']} at the first compile's end "
             "(the compile seconds depend on it and on this CPU, not on the chip).", "",
             f"Command: `{first['command']}`", "",
             "| program | compile s | temporaries GB | arguments GB | TFLOPs per step |", "|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['program']} | failed after {row['failed_after_s']} s: {row['error']} | | | |")
        else:
            lines.append(f"| {row['program']} | {row['compile_s']} | {row['temp_gb']} | {row['argument_gb']} "
                         f"| {row['tflops']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exported", type=Path)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--topology", default="v5e:1x1")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:  # the folder as `bench --exported` reads it: a missing or damaged one is one line
        manifest = read_manifest(args.exported)
        artifacts = [(name, read_checked(args.exported, name, sha256, manifest.file_bytes[name]))
                     for name, sha256 in manifest.program(args.batch).train_files()]
    except UsageError as error:
        print(f"tpu_aot_compile: error: {error}", file=sys.stderr)
        return 2
    device = tpu_device(args.topology)
    rows = []
    for name, artifact in artifacts:
        started, done = time.perf_counter(), threading.Event()
        threading.Thread(target=heartbeat, args=(name, started, done), daemon=True).start()
        try:
            row = compile_program(name, artifact, device)
        except Exception as error:  # noqa: BLE001 - an out-of-memory compile is a result, not a crash
            row = {"program": name, "error": str(error).splitlines()[0][:300],
                   "failed_after_s": round(time.perf_counter() - started, 1)}
        done.set()
        row.update({"size": manifest.size, "batch": args.batch, "precision": manifest.precision,
                    "topology": args.topology, "host_cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2),
                    "command": shlex.join(["python", "benchmarks/tpu_aot_compile.py", *sys.argv[1:]])})
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out is not None:
        temporary = args.out.with_suffix(args.out.suffix + ".tmp")
        temporary.write_text(markdown(rows))
        temporary.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
