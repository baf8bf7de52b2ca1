"""Where an exported step's device time goes, per op and per kind of op, at several batch sizes.

XLA's cost analysis gives one step's FLOPs and bytes, which cannot say why a step is slower per
sample at one batch than at another. This runs an exported step (`trainspeed export`) with JAX
alone, traces a few steps with `jax.profiler`, and joins each traced op to its instruction in the
compiled program's optimized HLO (`benchmarks/hlo_ops.py`): what the op is, the PyTorch op it came
from, its matmul FLOPs, and the buffers it reads and writes with their tiled (padded) sizes and
whether they sit in the chip's HBM or in on-chip memory (`S(1)`: XLA's memory space assignment put
them there). The summary groups the ops' device time by kind and by source, per sample, with the
TFLOP/s and HBM GB/s each group ran at. Nothing on this path imports torch.

    python benchmarks/tpu_profile.py measure --exported .tpu/mahjong_base_bf16 --batch-sizes 64,1024,4096 --out OUT
    python benchmarks/tpu_profile.py summarize OUT/raw --out OUT      # again, from the raw files

`measure` writes, per folder and batch size, the optimized HLO, the trace (`.xplane.pb`) and the
timing into OUT/raw/, then `summary.json` and `summary.md` into OUT; `summarize` makes those two
from a raw folder (of a run cut short, or elsewhere).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.hlo_ops import CATEGORIES, category, is_async, parse_program, shape_text, source

@dataclass
class OpTime:
    name: str
    category: str
    source: str
    kind: str
    count: int
    device_s: float
    flops: float
    hbm_bytes: int
    """The bytes, as tiled in HBM, of the operands and results it touches that are not on chip."""
    on_chip_bytes: int
    tiled_bytes: int
    logical_bytes: int
    shapes: str


def device_events(xplane: Path) -> tuple[list[tuple[str, float, dict[str, Any]]], dict[str, Any]]:
    """(op name, seconds, stats) of every op the device ran in the trace, and what was seen where:
    a TPU plane's "XLA Ops" line where there is one, else every host thread's events (the CPU)."""
    from jax.profiler import ProfileData

    data = ProfileData.from_file(str(xplane))
    seen: dict[str, Any] = {"planes": {}}
    device_lines = []
    for plane in data.planes:
        lines = {line.name: line for line in plane.lines}
        seen["planes"][plane.name] = {name: sum(1 for _ in line.events) for name, line in lines.items()}
        if plane.name.startswith("/device:"):
            device_lines += [lines["XLA Ops"]] if "XLA Ops" in lines else [
                line for name, line in lines.items() if name not in ("XLA Modules", "Steps")]
        if plane.name.startswith("/device:") and "XLA Modules" in lines:
            seen.setdefault("modules", Counter()).update(event.name for event in lines["XLA Modules"].events)
    if not device_lines:
        host = data.find_plane_with_name("/host:CPU")
        device_lines = [line for line in host.lines if line.name != "python"] if host is not None else []
        seen["source"] = "host CPU threads"
    else:
        seen["source"] = "device lines " + ", ".join(sorted({line.name for line in device_lines}))
    events = []
    for line in device_lines:
        for event in line.events:
            stats = {key: value for key, value in event.stats}
            events.append((event.name, event.duration_ns / 1e9, stats))
    seen["stat_names"] = sorted({key for _, _, stats in events[:200] for key in stats})
    return events, seen


def summarize_config(hlo_text: str, xplane: Path | None, steps: int, batch: int, step_s: float) -> dict[str, Any]:
    program = parse_program(hlo_text)
    summary: dict[str, Any] = {"batch_size": batch, "step_s": step_s, "samples_per_s": batch / step_s,
                               "traced_steps": steps}
    summary["program_instructions"] = len(program.instructions)
    if xplane is None:
        return summary
    events, seen = device_events(xplane)
    summary["trace"] = {key: (dict(value) if isinstance(value, Counter) else value) for key, value in seen.items()}
    by_name: dict[str, OpTime] = {}
    unmatched = Counter()
    for event_name, seconds, stats in events:
        name = event_name.split(" = ", 1)[0].strip().lstrip("%")  # a TPU names an op by its whole HLO line
        if name not in program.instructions and str(stats.get("hlo_op", "")).lstrip("%") in program.instructions:
            name = str(stats["hlo_op"]).lstrip("%")
        instruction = program.instructions.get(name)
        if instruction is None:
            unmatched[name] += seconds
            continue
        op = by_name.get(name)
        if op is None:
            buffers = program.buffers(instruction)
            shapes = " ".join(shape_text(b) for b in instruction.result[:2]) + " <- " + " ".join(
                shape_text(b) for b in buffers[len(instruction.result):][:3])
            op = by_name[name] = OpTime(
                name, category(program, instruction), source(instruction.op_name), instruction.kind or instruction.opcode,
                0, 0.0, program.matmul_flops(instruction),
                0 if is_async(instruction) else sum(b.tiled_bytes for b in buffers if not b.on_chip),
                0 if is_async(instruction) else sum(b.tiled_bytes for b in buffers if b.on_chip),
                sum(b.tiled_bytes for b in buffers),
                sum(b.logical_bytes for b in buffers), shapes)
        op.count += 1
        op.device_s += seconds
    ops = list(by_name.values())
    per_step = sum(op.device_s for op in ops) / steps if steps else 0.0
    summary["device_s_per_step"] = per_step
    summary["device_us_per_sample"] = per_step / batch * 1e6
    summary["device_busy_share"] = per_step / step_s if step_s else None
    summary["unmatched_s_per_step"] = sum(unmatched.values()) / steps if steps else 0.0
    summary["unmatched_top"] = [[name, seconds / steps] for name, seconds in unmatched.most_common(5)]
    summary["all"] = _group(ops, steps, batch, per_step)
    summary["categories"] = {name: _group([op for op in ops if op.category == name], steps, batch, per_step)
                             for name in CATEGORIES}
    sources = defaultdict(list)
    for op in ops:
        sources[op.source].append(op)
    grouped = {name: _group(members, steps, batch, per_step) for name, members in sources.items()}
    summary["sources"] = dict(sorted(grouped.items(), key=lambda item: -item[1]["s_per_step"])[:15])
    summary["top_ops"] = [
        {**asdict(op), "s_per_step": op.device_s / steps, "share": op.device_s / steps / per_step if per_step else 0.0,
         **_rates(op.device_s, op.flops * op.count, op.hbm_bytes * op.count)}
        for op in sorted(ops, key=lambda op: -op.device_s)[:10]
    ]
    return summary


def _rates(seconds: float, flops: float, hbm_bytes: float) -> dict[str, float]:
    return {"tflop_per_s": flops / seconds / 1e12 if seconds else 0.0,
            "hbm_gb_per_s": hbm_bytes / seconds / 1e9 if seconds else 0.0}


def _group(ops: list[OpTime], steps: int, batch: int, per_step: float) -> dict[str, float]:
    """A group of ops per step: device time, its share, per sample, and the rates it ran at."""
    seconds = sum(op.device_s for op in ops) / steps if steps else 0.0
    flops = sum(op.flops * op.count for op in ops) / steps if steps else 0.0
    hbm = sum(op.hbm_bytes * op.count for op in ops) / steps if steps else 0.0
    touched = sum((op.hbm_bytes + op.on_chip_bytes) * op.count for op in ops)
    return {
        "s_per_step": seconds, "share": seconds / per_step if per_step else 0.0, "us_per_sample": seconds / batch * 1e6,
        "ops_per_step": sum(op.count for op in ops) / steps if steps else 0.0,
        "matmul_flops_per_step": flops, "hbm_bytes_per_step": hbm, **_rates(seconds, flops, hbm),
        "on_chip_share_of_bytes": sum(op.on_chip_bytes * op.count for op in ops) / touched if touched else 0.0,
        "tiled_over_logical": (sum(op.tiled_bytes * op.count for op in ops)
                               / max(1, sum(op.logical_bytes * op.count for op in ops))),
    }


def _config_name(folder: Path, batch: int) -> str:
    return f"{folder.name}_b{batch}"


def _trace_options() -> Any:
    """No Python tracer and no HLO in the trace: the optimized HLO is written beside it, and the
    trace stays small enough to bring back from a borrowed machine."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.enable_hlo_proto = False
    return options


def measure_one(folder: Path, exported: Any, batch: int, steps: int, raw: Path) -> None:
    """Compile, warm up, time `steps` steps, then trace `steps` more; write the HLO, trace and timing."""
    import jax

    name = _config_name(folder, batch)
    began = time.perf_counter()
    program = exported.train_program(batch)
    state, rates = exported.initial_state(), exported.learning_rates()
    columns = [jax.device_put(column) for column in exported.host_batch(batch)]
    state, loss = program(state, columns, rates)
    jax.block_until_ready(state)
    compile_s = program.last_compile_s()
    state, loss = program(state, columns, rates)
    jax.block_until_ready(state)
    start = time.perf_counter()
    for _ in range(steps):
        state, loss = program(state, columns, rates)
    jax.block_until_ready(state)
    step_s = (time.perf_counter() - start) / steps
    (raw / f"{name}.hlo.txt").write_text(list(program.programs.values())[-1].as_text())
    trace_dir = raw / f"{name}.trace"
    try:
        with jax.profiler.trace(str(trace_dir), profiler_options=_trace_options()):
            for _ in range(steps):
                state, loss = program(state, columns, rates)
            jax.block_until_ready(state)
        xplanes = list(trace_dir.rglob("*.xplane.pb"))
        if xplanes:
            shutil.move(str(xplanes[0]), raw / f"{name}.xplane.pb")
    except Exception as error:  # noqa: BLE001 - the HLO and the timing still say much
        print(f"{name}: trace failed: {type(error).__name__}: {error}", flush=True)
    shutil.rmtree(trace_dir, ignore_errors=True)
    (raw / f"{name}.json").write_text(json.dumps({
        "folder": str(folder), "batch_size": batch, "steps": steps, "step_s": step_s, "compile_s": compile_s,
        "costs": program.last_costs(), "loss": float(loss), "device": jax.devices()[0].device_kind,
        "jax": jax.__version__,
    }))
    program.programs.clear()
    print(f"{name}: step {step_s * 1e3:.2f} ms, {batch / step_s:,.0f} samples/s, compile {compile_s:.1f} s, "
          f"{time.perf_counter() - began:.1f} s in all", flush=True)


def measure(folders: list[Path], batch_sizes: list[int], steps: int, out: Path) -> None:
    """Each folder at each batch size, then the summary (a call cut short keeps the raw files of
    the sizes it measured: `summarize` reads them)."""
    import jax

    from trainspeed.exported.load import ExportedSteps

    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}", flush=True)
    for folder in folders:
        exported = ExportedSteps.open(folder)
        for batch in batch_sizes:
            try:
                measure_one(folder, exported, batch, steps, raw)
            except Exception as error:  # noqa: BLE001 - one size that fails (out of memory) leaves the others
                print(f"{_config_name(folder, batch)}: {type(error).__name__}: {str(error)[:300]}", flush=True)
                continue
    summarize(raw, out)


def summarize(raw: Path, out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for meta_file in sorted(raw.glob("*.json"), key=lambda p: (p.stem.rsplit("_b", 1)[0], int(p.stem.rsplit("_b", 1)[1]))):
        meta = json.loads(meta_file.read_text())
        hlo = raw / f"{meta_file.stem}.hlo.txt"
        xplane = raw / f"{meta_file.stem}.xplane.pb"
        summary = summarize_config(hlo.read_text(), xplane if xplane.exists() else None, meta["steps"],
                                   meta["batch_size"], meta["step_s"])
        summary.update({key: meta[key] for key in ("folder", "compile_s", "costs", "device", "jax")})
        results[meta_file.stem] = summary
    (out / "summary.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "summary.md").write_text(markdown(results))
    return results


def markdown(results: dict[str, Any]) -> str:
    """The tables a reader compares across batch sizes: per kind of op and per source op, the
    device microseconds per sample, their share, and the rates they ran at."""
    names = list(results)
    machines = sorted({f"{r.get('device')}, jax {r.get('jax')}, {r.get('traced_steps')} steps traced" for r in results.values()})
    lines = [f"Measured on: {'; '.join(machines)}. Device time per sample (us), from the trace; in brackets "
             "the share of the step's device time, the matmul TFLOP/s and the HBM GB/s (tiled bytes of operands "
             "and results not on chip) it ran at.", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]

    def row(label: str, groups: list[dict[str, Any] | None]) -> str:
        cells = [f"{g['us_per_sample']:.2f} ({g['share']:.0%}, {g['tflop_per_s']:.0f} TF/s, {g['hbm_gb_per_s']:.0f} GB/s)"
                 if g else "-" for g in groups]
        return f"| {label} | " + " | ".join(cells) + " |"

    lines.append("| samples/s (host-timed, " + "few steps) | " + " | ".join(
        f"{results[n]['samples_per_s']:,.0f}" for n in names) + " |")
    lines.append("| device busy / step time | " + " | ".join(
        f"{results[n].get('device_busy_share') or 0:.0%}" for n in names) + " |")
    lines.append("| on-chip (S(1)) share of bytes touched | " + " | ".join(
        f"{results[n].get('all', {}).get('on_chip_share_of_bytes', 0):.0%}" for n in names) + " |")
    lines.append(row("all ops", [results[n].get("all") for n in names]))
    for name in CATEGORIES:
        lines.append(row(name, [results[n].get("categories", {}).get(name) for n in names]))
    sources: list[str] = []
    for n in names:
        sources += [s for s in list(results[n].get("sources", {}))[:10] if s not in sources]
    lines += ["", "By the PyTorch op each HLO op came from (the ten largest of each batch size):", "",
              "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for name in sources:
        lines.append(row(name, [results[n].get("sources", {}).get(name) for n in names]))
    for n in names:
        lines += ["", f"### {n}: the ops that take most device time", "",
                  "| op | source | kind | share | us/step | TF/s | HBM GB/s | tiled/logical | shapes |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for op in results[n].get("top_ops", [])[:8]:
            lines.append(f"| {op['name']} | {op['source']} | {op['kind']} | {op['share']:.1%} | "
                         f"{op['s_per_step'] * 1e6:.0f} | {op['tflop_per_s']:.1f} | {op['hbm_gb_per_s']:.0f} | "
                         f"{op['tiled_bytes'] / max(1, op['logical_bytes']):.2f} | {op['shapes']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="run, trace and summarize exported steps on this machine's JAX device")
    run.add_argument("--exported", type=Path, action="append", required=True, help="an exported folder (repeatable)")
    run.add_argument("--batch-sizes", required=True, help="comma-separated, each exported in every folder")
    run.add_argument("--steps", type=int, default=2, help="steps timed, then traced, per batch size")
    run.add_argument("--out", type=Path, required=True)
    again = commands.add_parser("summarize", help="summary.json and summary.md again from a raw folder")
    again.add_argument("raw", type=Path)
    again.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "measure":
        from trainspeed.errors import UsageError

        try:
            sizes = [int(size) for size in args.batch_sizes.split(",")]
        except ValueError:
            print(f"error: --batch-sizes {args.batch_sizes!r}: give whole numbers joined by commas (64,1024)", file=sys.stderr)
            return 2
        try:
            measure(args.exported, sizes, args.steps, args.out)
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    else:
        if not args.raw.is_dir():
            print(f"error: {args.raw} is not a folder of raw profile files (measure's OUT/raw)", file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        summarize(args.raw, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
