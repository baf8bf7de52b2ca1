"""How fast trainspeed's commands start: wall time, peak RSS and the heavy modules each one imports.

Each command runs `--runs` times in a fresh Python, as a user's shell starts it (`python -m
trainspeed ...` from the tree's root, so that tree's code runs), after one untimed run that warms
the file cache. A row per command records the median, fastest and slowest wall time, the child's
peak RSS (from `os.wait4`) and which of torch, torch_xla, jax, grpc, matplotlib and numpy it
imported (read from `python -X importtime`). Two reference lines bound the numbers: an empty
Python (`python -c pass`) and `import torch`.

`--tree` may be given more than once (this checkout and an earlier commit checked out beside it,
`git worktree add ../before COMMIT`): the trees are measured in turns, command by command, so
their rows are of one run on one machine under one load.

    python benchmarks/startup.py --tree . --out docs/results/startup.jsonl
    python benchmarks/startup.py --tree . --tree ../before --out docs/results/startup.jsonl
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.machine import Machine
from trainspeed.rows import row_line

HEAVY = ("torch", "torch_xla", "jax", "grpc", "matplotlib", "numpy")
"""Packages whose import costs a command seconds or tens of MB before it does anything."""
REPORT_INPUT = Path("docs/results/bench_cpu_mahjong_tiny.jsonl")
"""A committed results file of every tree measured: what `report` and `plot` read."""


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    """Arguments after `python`; `{shards}` and `{scratch}` are filled in per run."""


def commands() -> list[Command]:
    trainspeed = ["-m", "trainspeed"]
    return [
        Command("python -c pass", ["-c", "pass"]),
        Command("python -c 'import torch'", ["-c", "import torch"]),
        Command("python -c 'import trainspeed'", ["-c", "import trainspeed"]),
        Command("trainspeed --help", [*trainspeed, "--help"]),
        Command("trainspeed bench --help", [*trainspeed, "bench", "--help"]),
        Command("trainspeed train --help", [*trainspeed, "train", "--help"]),
        Command("trainspeed study --help", [*trainspeed, "study", "--help"]),
        Command("trainspeed data verify", [*trainspeed, "data", "verify", "{shards}"]),
        Command("trainspeed data inspect", [*trainspeed, "data", "inspect", "{shards}"]),
        Command("trainspeed report", [*trainspeed, "report", str(REPORT_INPUT), "--out", "{scratch}/report.html"]),
        Command("trainspeed plot", [*trainspeed, "plot", str(REPORT_INPUT), "--out", "{scratch}/plot"]),
    ]


@dataclass(frozen=True)
class Start:
    wall_s: float
    peak_rss_bytes: int


def child_environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree.resolve())
    env.setdefault("PJRT_DEVICE", "CPU")
    return env


def start_once(argv: list[str], tree: Path) -> Start:
    """One run: wall time from fork to exit, and the child's peak resident memory."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, *argv], cwd=tree, env=child_environment(tree),
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        wall_s = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            last = stderr.read().decode(errors="replace").strip().splitlines()[-1:]
            raise SystemExit(f"startup: `python {shlex.join(argv)}` in {tree} failed ({process.returncode}): "
                             f"{last[0] if last else 'no output'}")
    return Start(wall_s, usage.ru_maxrss * 1024)


def imported_modules(argv: list[str], tree: Path) -> set[str]:
    """Every module a run imports, from `python -X importtime`'s report."""
    result = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=tree, env=child_environment(tree),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


def heavy_imports(argv: list[str], tree: Path) -> list[str]:
    """The HEAVY packages a run imports, from `python -X importtime`'s report."""
    imported = {name.split(".")[0] for name in imported_modules(argv, tree)}
    return [name for name in HEAVY if name in imported]


def git_commit(tree: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or None


def write_shards(folder: Path, tree: Path) -> Path:
    """A small shard set for `data verify` and `inspect`, written by the tree's own `data from-arrays`."""
    arrays = folder / "arrays.npz"
    np.savez(arrays, x=np.arange(4096, dtype=np.float32).reshape(1024, 4), y=np.arange(1024, dtype=np.int64))
    shards = folder / f"shards-{abs(hash(str(tree))) % 10**8}"
    start_once(["-m", "trainspeed", "data", "from-arrays", str(arrays), "--out", str(shards)], tree)
    return shards


def measure(trees: list[Path], runs: int, only: set[str] | None, command_line: str) -> list[MeasurementRow]:
    machine = Machine.at_start()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        shards = {tree: write_shards(Path(scratch), tree) for tree in trees}
        for command in commands():
            if only and command.name not in only:
                continue
            for tree in trees:
                argv = [part.format(shards=shards[tree], scratch=scratch) for part in command.argv]
                start_once(argv, tree)  # warms the file cache; not counted
                starts = [start_once(argv, tree) for _ in range(runs)]
                walls = [start.wall_s for start in starts]
                values = {
                    "command": command.name, "tree": str(tree), "commit": git_commit(tree), "runs": runs,
                    "wall_s_median": statistics.median(walls), "wall_s_min": min(walls), "wall_s_max": max(walls),
                    "peak_rss_mib_median": statistics.median(start.peak_rss_bytes for start in starts) / 2**20,
                    "heavy_imports": heavy_imports(argv, tree),
                }
                print(f"{command.name:28s} {tree}: {values['wall_s_median']:.3f} s, "
                      f"{values['peak_rss_mib_median']:.0f} MiB, imports {', '.join(values['heavy_imports']) or '-'}",
                      flush=True)
                rows.append(values)
    end = machine.at_end()
    return [MeasurementRow.of("startup", values, command_line, end) for values in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", default=None,
                        help="a checkout of trainspeed to measure (repeat it to compare; default: this one)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command and tree (default 7)")
    parser.add_argument("--only", default=None, help="comma list of command names to measure (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file the rows are written to (replaced)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    trees = args.tree or [Path(".")]
    for tree in trees:
        if not (tree / "trainspeed" / "__main__.py").is_file():
            parser.error(f"--tree {tree} is not a trainspeed checkout (no trainspeed/__main__.py)")
    only = {name.strip() for name in args.only.split(",")} if args.only else None
    command_line = shlex.join(["python", "benchmarks/startup.py", *(sys.argv[1:] if argv is None else argv)])
    rows = measure(trees, args.runs, only, command_line)
    atomic_write_text(args.out, "".join(row_line(row) + "\n" for row in rows))
    print(f"rows written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
