"""The plan checks of `benchmarks/plan_checks.sh` as one table: each `plan-check` row of the files
given, its configuration (fixed or auto, the batches auto trained at), predicted seconds with their
interval, measured seconds, the ratio, steps and step times, and the machine's load around the run.

    python benchmarks/plan_checks_table.py docs/results/plan_checks_*.jsonl --csv OUT.csv --png OUT.png > OUT.md
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
from pathlib import Path

FIELDS = ("workload", "config", "schedule", "batches", "predicted_s", "predicted_lo", "predicted_hi", "measured_s",
          "ratio", "within", "predicted_steps", "measured_steps", "predicted_step_ms", "measured_step_ms",
          "threads", "load_start", "load_end", "reached")


def rows_of(paths: list[Path]) -> list[dict]:
    found = []
    for path in paths:
        for line in path.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("kind") != "plan-check":
                continue
            machine = record.get("machine") or {}
            interval = record.get("predicted_s_ci95") or [None, None]
            batches = record.get("batches") or [record["global_batch"]]
            found.append({
                "workload": path.stem.removeprefix("plan_checks_"), "config": record["config"],
                "schedule": record.get("schedule", "fixed"), "batches": " -> ".join(map(str, batches)),
                "predicted_s": record["predicted_s"], "predicted_lo": interval[0], "predicted_hi": interval[1],
                "measured_s": record["measured_s"], "ratio": record["ratio"], "within": record["within"],
                "predicted_steps": record["predicted_steps"], "measured_steps": record["measured_steps"],
                "predicted_step_ms": 1e3 * record["predicted_step_s"],
                "measured_step_ms": 1e3 * record["measured_step_s"] if record["measured_step_s"] else None,
                "threads": machine.get("torch_threads"), "load_start": machine.get("load_average_start"),
                "load_end": machine.get("load_average_end"), "reached": record["reached"]})
    return found


def _number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | configuration | fixed/auto (batches trained) | predicted s [95%] | measured s | "
             "measured / predicted | steps predicted / measured | step ms predicted / measured | load before, after |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(
            f"| {row['workload']} | `{row['config']}` | {row['schedule']} ({row['batches']}) | "
            f"{_number(row['predicted_s'])} [{_number(row['predicted_lo'])}, {_number(row['predicted_hi'])}] | "
            f"{_number(row['measured_s'])} | {'**' if not row['within'] else ''}{row['ratio']:.2f}"
            f"{'**' if not row['within'] else ''} | {_number(row['predicted_steps'])} / {_number(row['measured_steps'])} | "
            f"{_number(row['predicted_step_ms'])} / {_number(row['measured_step_ms'])} | "
            f"{_number(row['load_start'], 2)}, {_number(row['load_end'], 2)} |")
    return "\n".join(lines)


def figure(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.5, 5.5))
    top = 1.15 * max(max(row["measured_s"], row["predicted_s"]) for row in rows)
    axis.plot([0, top], [0, top], color="black", linewidth=1, label="measured = predicted")
    axis.fill_between([0, top], [0, 0.75 * top], [0, 1.25 * top], color="grey", alpha=0.2, label="±25%")
    markers = {"fixed": "o", "auto": "^"}
    colours = {}
    for row in rows:
        colour = colours.setdefault(row["workload"], f"C{len(colours)}")
        compiled = ":compile:" in row["config"]
        axis.scatter(row["predicted_s"], row["measured_s"], marker=markers.get(row["schedule"], "o"),
                     facecolors="none" if compiled else colour, edgecolors=colour, s=60)
        if row["predicted_lo"] is not None:
            axis.plot([row["predicted_lo"], row["predicted_hi"]], [row["measured_s"]] * 2, color=colour, linewidth=1)
    for workload, colour in colours.items():
        axis.scatter([], [], color=colour, label=workload)
    axis.scatter([], [], marker="^", color="grey", label="auto (circles: fixed; hollow: compiled)")
    axis.set(xlim=(0, top), ylim=(0, top), xlabel="predicted s to the goal (interval: 95%)",
             ylabel="measured s (the whole train command)", title="Plan checks: measured against predicted")
    axis.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--png", type=Path, required=True)
    args = parser.parse_args()
    rows = rows_of(args.inputs)
    with args.csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    figure(rows, args.png)
    print(markdown(rows))


if __name__ == "__main__":
    main()
