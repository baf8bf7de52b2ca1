"""Table and figure of bench_remote.py's rows: remote over local samples/s vs log2(batch), per link,
synchronous and pipelined, with bytes per step and a simple model beside the measurements.

The model, per batch size:

    compute   = the local step time (host-fed; the same target in the benchmark's own process)
    wire      = bytes sent per step / link rate + round trip
    sync      = compute + wire                  (in-flight=1: a batch crosses, then the step runs)
    pipelined = max(compute, wire)              (in-flight=2: the next batch crosses during the step)
    ratio     = compute / sync  or  compute / pipelined

An emulated link uses its configured rate and round trip. Loopback has no configured rate, so its
model uses the rate fitted to its own synchronous rows (bytes over measured wire time), and says so.
The measured wire time of a row is its client step minus the server's own step (`server_step_s`);
the wire dominates where it exceeds the server's step. Where a configuration was measured in
several rounds (bench_remote.py --rounds), the report takes its median round (by samples/s).

    python benchmarks/remote_report.py docs/results/remote_cpu_mahjong_tiny.jsonl [--out STEM]
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from trainspeed.bench.ratios import latest_rows  # noqa: E402
from trainspeed.bench.results import ResultRow, read_rows  # noqa: E402
from trainspeed.wire.pacing import parse_duration, parse_rate  # noqa: E402

RATE_IN_LABEL = re.compile(r"(\d+(?:\.\d+)?[kmg]bit)")
RTT_IN_LABEL = re.compile(r"rtt-(\d+(?:\.\d+)?(?:us|ms|s))")


@dataclass
class LinkRows:
    label: str
    rows: dict[tuple[str, int], dict[int, ResultRow]] = field(default_factory=dict)
    """(feed, in_flight) -> batch size -> row."""

    def get(self, feed: str, in_flight: int, batch: int) -> ResultRow | None:
        return self.rows.get((feed, in_flight), {}).get(batch)

    @property
    def rate_bits_s(self) -> float | None:
        match = RATE_IN_LABEL.search(self.label)
        return parse_rate(match.group(1)) if match else None

    @property
    def rtt_s(self) -> float:
        match = RTT_IN_LABEL.search(self.label)
        return parse_duration(match.group(1)) if match else 0.0


@dataclass
class Measurements:
    local: dict[str, dict[int, ResultRow]]
    """feed -> batch size -> local row."""
    links: list[LinkRows]
    batch_sizes: list[int]


def median_rounds(rows: list[ResultRow]) -> list[ResultRow]:
    """Per (target, feed, batch size), the row of the median round by samples/s (the lower middle
    of an even count), so one disturbed round does not decide a point."""
    groups: dict[tuple, list[ResultRow]] = {}
    for row in rows:
        groups.setdefault((row.workload, row.size, row.target, row.feed, row.batch_size), []).append(row)
    chosen = []
    for group in groups.values():
        ordered = sorted(group, key=lambda row: row.samples_per_s)
        chosen.append(ordered[(len(ordered) - 1) // 2])
    return chosen


def load(path: Path) -> Measurements:
    rows = median_rounds([row for row in read_rows(path) if row.is_measured])
    local: dict[str, dict[int, ResultRow]] = {}
    links: dict[str, LinkRows] = {}
    for row in rows:
        feed = row.feed or "device"
        if row.transport is None:  # the local baseline (bench_remote.py measures one local target)
            local.setdefault(feed, {})[row.batch_size] = row
        elif row.transport == "grpc":
            link = links.setdefault(row.link, LinkRows(row.link))
            link.rows.setdefault((feed, row.in_flight), {})[row.batch_size] = row
    return Measurements(local, list(links.values()), sorted({row.batch_size for row in rows}))


def step_s(row: ResultRow | None) -> float | None:
    return row.step_time_s if row is not None else None


def wire_s(row: ResultRow | None) -> float | None:
    """Client step minus the server's own step: the time the wire (and its copies) added. None
    where the row says its server time cannot be paired with its windows (`wire_time_suspect`)."""
    if row is None or row.server_step_s is None or row.wire_time_suspect:
        return None
    return row.step_time_s - row.server_step_s


def fitted_rate_bits_s(link: LinkRows) -> float | None:
    """Bytes over measured wire time of the synchronous host-fed rows (all batch sizes together)."""
    rows = list(link.rows.get(("host", 1), {}).values())
    total_bytes = sum(row.bytes_sent_per_step for row in rows)
    total_wire = sum(max(wire_s(row) - link.rtt_s, 1e-9) for row in rows)
    return 8 * total_bytes / total_wire if rows else None


def model_ratios(m: Measurements, link: LinkRows, batch: int) -> tuple[float, float] | None:
    """(sync, pipelined) ratio to local that the model predicts."""
    local = step_s(m.local.get("host", {}).get(batch))
    row = link.get("host", 1, batch)
    rate = link.rate_bits_s or fitted_rate_bits_s(link)
    if local is None or row is None or not rate:
        return None
    wire = row.bytes_sent_per_step * 8 / rate + link.rtt_s
    return local / (local + wire), local / max(local, wire)


def ratio(m: Measurements, link: LinkRows, feed: str, in_flight: int, batch: int) -> float | None:
    local, remote = m.local.get(feed, {}).get(batch), link.get(feed, in_flight, batch)
    if local is None or remote is None:
        return None
    return remote.samples_per_s / local.samples_per_s


def wire_share(link: LinkRows, batch: int) -> float | None:
    """Measured wire time over the server's step, synchronous and host-fed (> 1: the wire dominates)."""
    row = link.get("host", 1, batch)
    wire = wire_s(row)
    return wire / row.server_step_s if wire is not None and row.server_step_s else None


def wire_dominates_at(link: LinkRows, batch_sizes: list[int]) -> list[int]:
    """The batch sizes at which, synchronous and host-fed, the wire took longer than the server's step."""
    return [batch for batch in batch_sizes if (wire_share(link, batch) or 0) > 1]


def _cell(value: float | None, digits: str = ".2f") -> str:
    return "-" if value is None else format(value, digits)


def table(m: Measurements) -> str:
    lines = []
    for link in m.links:
        rate = link.rate_bits_s
        fitted = fitted_rate_bits_s(link)
        dominant = wire_dominates_at(link, m.batch_sizes)
        lines += [
            f"### {link.label}",
            "",
            f"link rate {'%.3g Gbit/s' % (rate / 1e9) if rate else 'not limited'}, round trip {link.rtt_s * 1e3:g} ms; "
            f"measured wire throughput (fitted to the synchronous host-fed rows) {(fitted or 0) / 1e9:.3g} Gbit/s; "
            f"the wire takes longer than the server's step at batch "
            f"{', '.join(map(str, dominant)) if dominant else 'none of ' + str(m.batch_sizes[0]) + '..' + str(m.batch_sizes[-1])}",
            "",
            "| batch | MB/step | local samples/s | sync | pipelined | device-fed | model sync | model pipelined | server step ms | wire ms (sync) | wire / step |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for batch in m.batch_sizes:
            row = link.get("host", 1, batch)
            local = m.local.get("host", {}).get(batch)
            model = model_ratios(m, link, batch) or (None, None)
            lines.append(
                f"| {batch} | {_cell(row.bytes_sent_per_step / 1e6 if row else None, '.2f')} "
                f"| {_cell(local.samples_per_s if local else None, ',.0f')} "
                f"| {_cell(ratio(m, link, 'host', 1, batch))} | {_cell(ratio(m, link, 'host', 2, batch))} "
                f"| {_cell(ratio(m, link, 'device', 1, batch))} | {_cell(model[0])} | {_cell(model[1])} "
                f"| {_cell(row.server_step_s * 1e3 if row else None, '.1f')} | {_cell(wire_s(row) * 1e3 if row else None, '.1f')} "
                f"| {_cell(wire_share(link, batch))} |"
            )
        lines.append("")
    return "\n".join(lines)


def bytes_per_sample(m: Measurements) -> float:
    """Host-fed bytes per step over the batch size (the batch layout does not depend on the model size)."""
    rows = [row for link in m.links for row in link.rows.get(("host", 1), {}).values()]
    return statistics.median(row.bytes_sent_per_step / row.batch_size for row in rows)


def projection(m: Measurements, device_rows: Path, target: str, rates: list[str]) -> str:
    """The model alone, for a faster device: its measured (device-fed) step times from another
    results file, these measurements' bytes per sample, and link rates without a round trip."""
    steps = {row.batch_size: row.step_time_s for row in latest_rows(read_rows(device_rows))
             if row.target == target and row.is_measured and (row.feed or "device") == "device"}
    per_sample = bytes_per_sample(m)
    lines = [f"Model only: {target} step times from {device_rows.name}, {per_sample:,.0f} bytes per sample; "
             "ratio remote/local, synchronous (pipelined)", "",
             "| batch | step ms | " + " | ".join(rates) + " |", "|---:|---:|" + "---:|" * len(rates)]
    for batch, step in sorted(steps.items()):
        cells = []
        for rate in rates:
            wire = batch * per_sample * 8 / parse_rate(rate)
            mark = "**" if wire > step else ""
            cells.append(f"{mark}{step / (step + wire):.2f} ({step / max(step, wire):.2f}){mark}")
        lines.append(f"| {batch} | {step * 1e3:.1f} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Bold: the wire takes longer than the step.")
    return "\n".join(lines)


def figure(m: Measurements, stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    from trainspeed.report.plot import save_figure

    fig, (ratio_axes, time_axes, bytes_axes) = plt.subplots(1, 3, figsize=(18, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs_all = [math.log2(b) for b in m.batch_sizes]
    for index, link in enumerate(m.links):
        color = colors[index % len(colors)]
        for feed, in_flight, style, marker, name in (("host", 1, "-", "o", "sync"), ("host", 2, "--", "s", "pipelined"),
                                                    ("device", 1, ":", "^", "device-fed sync")):
            points = [(math.log2(b), ratio(m, link, feed, in_flight, b)) for b in m.batch_sizes]
            points = [(x, y) for x, y in points if y is not None]
            if points:
                ratio_axes.plot(*zip(*points), linestyle=style, marker=marker, color=color, label=f"{link.label}: {name}")
        for which, style in ((0, "-"), (1, "--")):
            model = [(math.log2(b), (model_ratios(m, link, b) or (None, None))[which]) for b in m.batch_sizes]
            model = [(x, y) for x, y in model if y is not None]
            if model:
                ratio_axes.plot(*zip(*model), linestyle=style, color=color, alpha=0.35, linewidth=4)
        wires = [(math.log2(b), wire_s(link.get("host", 1, b))) for b in m.batch_sizes]
        wires = [(x, y) for x, y in wires if y is not None and y > 0]
        if wires:
            time_axes.plot(*zip(*wires), marker="o", color=color, label=f"wire: {link.label}")
        sent = [(math.log2(b), link.get("host", 1, b).bytes_sent_per_step) for b in m.batch_sizes if link.get("host", 1, b)]
        if sent and index == 0:
            bytes_axes.plot(*zip(*sent), marker="o", color="black", label="host-fed (every batch crosses)")
        sent = [(math.log2(b), link.get("device", 1, b).bytes_sent_per_step) for b in m.batch_sizes if link.get("device", 1, b)]
        if sent and index == 0:
            bytes_axes.plot(*zip(*sent), marker="^", linestyle=":", color="gray", label="device-fed (a handle crosses)")
    compute = [(math.log2(b), row.server_step_s) for b in m.batch_sizes
               for row in [next((link.get("host", 1, b) for link in m.links if link.get("host", 1, b)), None)] if row]
    if compute:
        time_axes.plot(*zip(*compute), marker="D", color="black", linewidth=2, label="server step (compute)")
    ratio_axes.axhline(1.0, color="gray", linewidth=0.8)
    ratio_axes.set_ylim(0, 1.3)
    ratio_axes.set_ylabel("remote samples/s / local samples/s")
    ratio_axes.set_title("remote (Node) over local (VM); thick pale lines: model")
    time_axes.set_yscale("log")
    time_axes.set_ylabel("seconds per step (synchronous, host-fed)")
    time_axes.set_title("wire time (client step - server step) vs compute")
    bytes_axes.set_yscale("log")
    bytes_axes.set_ylabel("bytes sent per step")
    bytes_axes.set_title("what crosses the wire per step")
    for axes in (ratio_axes, time_axes, bytes_axes):
        axes.set_xticks(xs_all, [str(b) for b in m.batch_sizes])
        axes.set_xlabel("batch size (log2 scale)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, stem, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="figure stem (default: beside RESULTS)")
    parser.add_argument("--project", type=Path, default=None,
                        help="bench rows of a faster device: print the model's ratios for its step times")
    parser.add_argument("--project-target", default="cuda:eager:bf16")
    parser.add_argument("--project-rates", default="1gbit,10gbit,100gbit", type=lambda s: s.split(","))
    args = parser.parse_args(argv)
    measurements = load(args.results)
    print(table(measurements))
    if args.project:
        print(projection(measurements, args.project, args.project_target, args.project_rates))
    for path in figure(measurements, args.out or args.results.with_suffix("")):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
