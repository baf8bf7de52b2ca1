"""The tables of docs/results/remote_cpu.md, computed from the rows of the remote study.

    python benchmarks/remote_tables.py docs/results/remote_cpu_mahjong_tiny.jsonl \
        [--pipelined docs/results/remote_pipelined_cpu_mahjong_tiny.jsonl] \
        [--project docs/results/bench_h200_mahjong_base.jsonl]

Measured: per link, remote over local samples/s (each remote row over the local row of its own
bench run, `trainspeed.bench.ratios.remote_over_local`), synchronous and host-fed, device-fed, and
the wire time over the server's step; a wire time that is negative or flagged is left out and
counted. Model, beside it: per batch size, with `compute` the local host-fed step time and `wire`
= bytes sent per step / link rate + round trip (the bytes each row sent), synchronous = compute +
wire, pipelined = max(compute, wire), remote / local = compute / that. Projection (`--project`):
the model alone for a faster device, its measured device-fed step times and the bytes of one
sample of today's workload (its synthetic batch, as a host-fed step sends it), at several link
rates; and at one batch how far the answer moves with the link rate, the bytes per sample (the
features in float32 instead of the float16 its data holds), the link's efficiency and the device's dtype. It is a
model with those free parameters, not a measurement of a remote GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.bench.ratios import RemotePair, latest_rows, remote_pairs  # noqa: E402
from trainspeed.bench.results import ResultRow, read_rows  # noqa: E402
from trainspeed.wire.pacing import parse_duration, parse_rate  # noqa: E402
from trainspeed.workloads import get_workload  # noqa: E402
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA  # noqa: E402

SHARD_SCHEMAS = {"mahjong": MAHJONG_SCHEMA}
"""The shard schema of each workload whose samples the loader reads from shards."""


def sample_bytes(workload: str, size: str, widen_floats: bool = False) -> int:
    """Bytes of one sample as a host-fed step sends it: the workload's synthetic batch of one,
    every tensor's bytes (for Mahjong: float16 features as its data holds them, the legal-action
    mask, the action); `widen_floats`: with every floating tensor in float32 instead."""
    batch = get_workload(workload).synthetic_batch(size, 1, torch.Generator().manual_seed(0))
    return sum((4 if widen_floats and tensor.is_floating_point() else tensor.element_size()) * tensor.numel()
               for tensor in batch.values())


def shard_sample_bytes(workload: str) -> int:
    """Bytes of one sample as the workload's shards hold it (for Mahjong: float16 features)."""
    return SHARD_SCHEMAS[workload].bytes_per_sample()


@dataclass(frozen=True)
class Span:
    low: float
    high: float
    count: int

    def __str__(self) -> str:
        return f"{self.low:.2f} - {self.high:.2f}" if self.count else "-"


def span(values: list[float]) -> Span:
    return Span(min(values), max(values), len(values)) if values else Span(0.0, 0.0, 0)


def rate_bits_s(label: str) -> float | None:
    """The configured rate a link's label names (`netns-tbf-1gbit-client-rtt-0.2ms`), None for loopback."""
    for part in label.split("-"):
        if part.endswith("bit"):
            return parse_rate(part)
    return None


def rtt_s(label: str) -> float:
    return parse_duration(label.rsplit("rtt-", 1)[1]) if "rtt-" in label else 0.0


def _pairs(rows: list[ResultRow], link: str, feed: str, in_flight: int) -> list[RemotePair]:
    return sorted((p for p in remote_pairs(rows) if p.remote.link == link and (p.remote.feed or "device") == feed
                   and p.remote.in_flight == in_flight and p.ratio is not None), key=lambda p: p.remote.batch_size)


def fitted_rate_bits_s(pairs: list[RemotePair], link: str) -> float | None:
    """Bytes over measured wire time of the synchronous host-fed rows (all batch sizes together)."""
    timed = [p.remote for p in pairs if p.remote.wire_s is not None]
    wire = sum(max(row.wire_s - rtt_s(link), 1e-9) for row in timed)
    return 8 * sum(row.bytes_sent_per_step for row in timed) / wire if timed else None


def modelled(local_step_s: float, bytes_per_step: float, rate: float, rtt: float) -> tuple[float, float]:
    """(synchronous, pipelined) remote / local samples/s the model predicts."""
    wire = bytes_per_step * 8 / rate + rtt
    return local_step_s / (local_step_s + wire), local_step_s / max(local_step_s, wire)


def link_table(rows: list[ResultRow]) -> str:
    lines = ["| link | measured wire rate | remote / local, synchronous | model | device-fed | wire / server step |"
             " rows left out |", "|---|---:|---|---|---|---|---:|"]
    for link in sorted({row.link for row in rows if row.link}):
        sync = _pairs(rows, link, "host", 1)
        fitted = fitted_rate_bits_s(sync, link)
        rate = rate_bits_s(link) or fitted
        model = [modelled(p.local.step_time_s, p.remote.bytes_sent_per_step, rate, rtt_s(link))[0] for p in sync] if rate else []
        shares = [p.remote.wire_s / p.remote.server_step_s for p in sync if p.remote.wire_s is not None]
        flagged = sum(1 for p in _pairs(rows, link, "host", 1) + _pairs(rows, link, "device", 1) if p.remote.wire_flagged)
        lines.append(f"| {link} | {(fitted or 0) / 1e9:.3g} Gbit/s | {span([p.ratio for p in sync])} ({len(sync)} batch sizes) "
                     f"| {span(model)} | {span([p.ratio for p in _pairs(rows, link, 'device', 1)])} | {span(shares)} "
                     f"| {flagged} (wire time negative) |")
    return "\n".join(lines)


def pipelined_table(rows: list[ResultRow]) -> str:
    """Synchronous against pipelined, per batch: the measured ratios, the wire's share of the
    server's step and the model's pipelined ratio, max(compute, wire)."""
    links = sorted({row.link for row in rows if row.link})
    header = "| batch | " + " | ".join(f"{link} sync | pipelined | wire / step | model pipelined" for link in links) + " |"
    lines = [header, "|---:|" + "---:|---:|---:|---:|" * len(links)]
    spans: dict[tuple[str, str], list[float]] = {}
    for batch in sorted({row.batch_size for row in rows}):
        cells = []
        for link in links:
            sync = [p for p in _pairs(rows, link, "host", 1) if p.remote.batch_size == batch]
            piped = [p for p in _pairs(rows, link, "host", 2) if p.remote.batch_size == batch]
            share = [p.remote.wire_s / p.remote.server_step_s for p in sync if p.remote.wire_s is not None]
            model = [modelled(p.local.step_time_s, p.remote.bytes_sent_per_step, rate_bits_s(link), rtt_s(link))[1]
                     for p in sync if rate_bits_s(link)]
            for name, values in (("sync", [p.ratio for p in sync]), ("pipelined", [p.ratio for p in piped]),
                                 ("wire / step", share), ("model pipelined", model)):
                spans.setdefault((link, name), []).extend(values)
                cells.append(f"{values[0]:.2f}" if values else "-")
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {link}, {name}: {span(values)}" for (link, name), values in spans.items()]
    return "\n".join(lines)


def bytes_per_sample(rows: list[ResultRow]) -> float:
    """Host-fed bytes per step over the batch size, as the rows sent them (the batch layout does not
    depend on the model size, but it does on the workload's definition when the rows were made)."""
    return statistics.median(row.bytes_sent_per_step / row.batch_size for row in rows
                             if row.is_remote and row.feed == "host" and row.bytes_sent_per_step)


def device_steps(path: Path, target: str) -> dict[int, float]:
    return {row.batch_size: row.step_time_s for row in latest_rows(read_rows(path))
            if row.target == target and row.is_measured and (row.feed or "device") == "device"}


def projected_workload(path: Path) -> tuple[str, str]:
    """(workload, size) of the device rows: the projection sends today's sample of that workload."""
    (workload, size), = {(row.workload, row.size) for row in read_rows(path)}
    return workload, size


def projection(rows: list[ResultRow], device_rows: Path, target: str, rates: list[str]) -> str:
    steps = device_steps(device_rows, target)
    workload, size = projected_workload(device_rows)
    per_sample = sample_bytes(workload, size)
    lines = [f"Model only: {target} step times of {device_rows.name}, {per_sample:,.0f} bytes per sample (today's "
             f"{workload} {size} batch; these rows sent {bytes_per_sample(rows):,.0f}); remote / local "
             "samples/s, synchronous (pipelined); bold: the wire takes longer than the step", "",
             "| batch | step ms | " + " | ".join(rates) + " |", "|---:|---:|" + "---:|" * len(rates)]
    for batch, step in sorted(steps.items()):
        cells = []
        for rate in rates:
            sync, pipelined = modelled(step, batch * per_sample, parse_rate(rate), 0.0)
            mark = "**" if batch * per_sample * 8 / parse_rate(rate) > step else ""
            cells.append(f"{mark}{sync:.2f} ({pipelined:.2f}){mark}")
        lines.append(f"| {batch} | {step * 1e3:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sensitivity(rows: list[ResultRow], device_rows: Path, target: str, batch: int, link: str) -> str:
    """How far the model's answer at one batch moves with each of its free parameters."""
    steps = device_steps(device_rows, target)
    other = {"cuda:eager:bf16": "cuda:eager:fp32"}.get(target)
    workload, size = projected_workload(device_rows)
    per_sample, widened = sample_bytes(workload, size), sample_bytes(workload, size, widen_floats=True)
    nominal = rate_bits_s(link)
    fitted = fitted_rate_bits_s(_pairs(rows, link, "host", 1), link)
    cases = [(f"the model as above ({per_sample:,} bytes per sample)", steps[batch], per_sample, nominal),
             ("10 Gbit/s instead of 1", steps[batch], per_sample, 10 * nominal),
             (f"{widened:,} bytes per sample (the features in float32)", steps[batch], widened, nominal),
             (f"the link's measured rate ({fitted / 1e9:.2f} Gbit/s on this CPU)", steps[batch], per_sample, fitted)]
    if other and batch in device_steps(device_rows, other):
        cases.append((f"{other}'s step time", device_steps(device_rows, other)[batch], per_sample, nominal))
    lines = [f"At batch {batch}, {link}: local samples/s over remote (the study's '5x' is this), synchronous", "",
             "| model | step ms | wire ms | local / remote |", "|---|---:|---:|---:|"]
    answers = []
    for name, step, nbytes, rate in cases:
        sync, _ = modelled(step, batch * nbytes, rate, 0.0)
        answers.append(1 / sync)
        lines.append(f"| {name} | {step * 1e3:.1f} | {batch * nbytes * 8 / rate * 1e3:.1f} | {1 / sync:.2f}x |")
    lines += ["", f"local / remote over these cases: {min(answers):.2f}x - {max(answers):.2f}x"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--pipelined", type=Path, default=None, help="rows of a sweep with several steps per window")
    parser.add_argument("--project", type=Path, default=None, help="bench rows of a faster device")
    parser.add_argument("--project-target", default="cuda:eager:bf16")
    parser.add_argument("--project-rates", default="1gbit,10gbit,100gbit", type=lambda s: s.split(","))
    parser.add_argument("--sensitivity-batch", type=int, default=2048)
    parser.add_argument("--sensitivity-link", default="netns-tbf-1gbit-client-rtt-0.2ms")
    args = parser.parse_args(argv)
    rows = read_rows(args.results)
    print(link_table(rows))
    if args.pipelined:
        print("\n" + pipelined_table(read_rows(args.pipelined)))
    if args.project:
        print("\n" + projection(rows, args.project, args.project_target, args.project_rates))
        print("\n" + sensitivity(rows, args.project, args.project_target, args.sensitivity_batch, args.sensitivity_link))
    return 0


if __name__ == "__main__":
    sys.exit(main())
