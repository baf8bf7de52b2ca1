"""1 vs 2 ranks on CPU with real data and without (--synthetic-data), and the IO efficiency.

    python benchmarks/bench_train_scaling.py --data DIR [--size tiny] [--batch 1024] [--steps 30] [--repeats 2]

Runs, side by side in one invocation and interleaved (so machine load drifts hit every configuration
alike), `trainspeed train` for nproc in {1, 2} x {real data, synthetic data}, plus `trainspeed bench`
for the same target and per-device batch. Every rank uses 1 torch thread and 1 loader worker.

IO efficiency here is measured two ways, both per device and from steady-state samples/s:
  vs synthetic: real-data run / synthetic-data run of the same loop (data IO alone);
  vs bench:     real-data run / bench samples/s (data IO + gradient all-reduce + loop overhead).
Appends one row per run to docs/results/train_scaling.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from trainspeed.atomic import append_line

RESULTS = Path("docs/results/train_scaling.jsonl")
TARGET = "cpu:eager:fp32"


@dataclass(frozen=True)
class RunRow:
    run_id: str
    repeat: int
    nproc: int
    data: str
    size: str
    batch_size_per_device: int
    steps: int
    threads_per_rank: int
    loader_workers_per_rank: int
    steady_samples_per_s: float
    end_to_end_samples_per_s: float
    samples_per_s_per_device: float
    data_wait_fraction: float
    data_wait_fraction_worst_rank: float
    step_time_s: float
    bench_samples_per_s: float


def run_bench(size: str, batch: int, out: Path) -> float:
    subprocess.run(
        [sys.executable, "-m", "trainspeed", "bench", "--workload", "mahjong", "--size", size, "--targets", TARGET,
         "--batch-sizes", str(batch), "--threads", "1", "--out", str(out), "--no-plot", "--no-progress"],
        check=True,
    )
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return float(rows[-1]["samples_per_s"])


def run_train(args: argparse.Namespace, nproc: int, synthetic: bool, bench_path: Path, run_dir: Path) -> dict:
    data = ["--synthetic-data"] if synthetic else ["--data", args.data]
    subprocess.run(
        [sys.executable, "-m", "trainspeed", "train", "--workload", "mahjong", "--size", args.size, *data,
         "--target", TARGET, "--nproc", str(nproc), "--batch-size-per-device", str(args.batch),
         "--steps", str(args.steps), "--threads", "1", "--num-workers", "1", "--timing-warmup-steps", "5",
         "--log-every", "10", "--bench-jsonl", str(bench_path), "--out", str(run_dir), "--no-progress"],
        check=True,
    )
    return json.loads((run_dir / "summary.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_train_scaling."))
    bench_path = scratch / "bench.jsonl"
    bench = run_bench(args.size, args.batch, bench_path)
    run_id = scratch.name.split(".")[-1]
    rows: list[RunRow] = []
    for repeat in range(args.repeats):
        for nproc in (1, 2):
            for synthetic in (False, True):
                name = f"r{repeat}-n{nproc}-{'synthetic' if synthetic else 'real'}"
                summary = run_train(args, nproc, synthetic, bench_path, scratch / name)
                row = RunRow(
                    run_id=run_id, repeat=repeat, nproc=nproc, data="synthetic" if synthetic else "real",
                    size=args.size, batch_size_per_device=args.batch, steps=args.steps, threads_per_rank=1,
                    loader_workers_per_rank=1, steady_samples_per_s=summary["steady_samples_per_s"],
                    end_to_end_samples_per_s=summary["end_to_end_samples_per_s"],
                    samples_per_s_per_device=summary["samples_per_s_per_device"],
                    data_wait_fraction=summary["data_wait_fraction"],
                    data_wait_fraction_worst_rank=summary["data_wait_fraction_worst_rank"],
                    step_time_s=summary["step_time_s"], bench_samples_per_s=bench,
                )
                append_line(RESULTS, json.dumps(asdict(row)))
                rows.append(row)
    print(f"bench {bench:,.1f} samples/s ({args.size}, batch {args.batch}, 1 thread)")
    for nproc in (1, 2):
        real = statistics.median(r.steady_samples_per_s for r in rows if r.nproc == nproc and r.data == "real")
        synthetic = statistics.median(r.steady_samples_per_s for r in rows if r.nproc == nproc and r.data == "synthetic")
        wait = statistics.median(r.data_wait_fraction for r in rows if r.nproc == nproc and r.data == "real")
        print(
            f"{nproc} rank(s): real {real:,.1f} samples/s, synthetic {synthetic:,.1f}, data wait {wait:.1%}, "
            f"IO efficiency vs synthetic {real / synthetic:.3f}, vs bench {real / nproc / bench:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
