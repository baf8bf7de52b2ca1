"""1 vs 2 ranks on CPU with real data and without (--synthetic-data), per batch size: the IO efficiency.

    python benchmarks/bench_train_scaling.py --data DIR [--size tiny] [--batch-sizes 256,1024,4096]
        [--steps 30] [--repeats 2] [--out results/train_scaling.jsonl]

For every per-device batch size it runs, interleaved (so machine load drifts hit every
configuration alike), `trainspeed train` for nproc in {1, 2} x {real data, synthetic data}, plus one
`trainspeed bench` of the same target and batch. Every rank uses 1 torch thread and 1 loader worker.

IO efficiency is measured two ways, both per device and from steady-state samples/s:
  vs synthetic: real-data run / synthetic-data run of the same loop (the cost of data IO alone);
  vs bench:     real-data run / bench samples/s (data IO + gradient all-reduce + loop overhead, and on
                a 2-core machine also the CPU that the ranks and their workers share).
Appends one row per run to --out; prints the ratios of medians per batch size and rank count.
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
    steady_data_wait_fraction: float | None
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


def run_train(args: argparse.Namespace, batch: int, nproc: int, synthetic: bool, run_dir: Path) -> dict:
    data = ["--synthetic-data"] if synthetic else ["--data", args.data]
    subprocess.run(
        [sys.executable, "-m", "trainspeed", "train", "--workload", "mahjong", "--size", args.size, *data,
         "--target", TARGET, "--nproc", str(nproc), "--batch-size-per-device", str(batch),
         "--steps", str(args.steps), "--threads", "1", "--num-workers", "1", "--timing-warmup-steps", "5",
         "--log-every", "10", "--out", str(run_dir), "--no-progress"],
        check=True, stdout=subprocess.DEVNULL,
    )
    return json.loads((run_dir / "summary.json").read_text())


def median_of(rows: list[RunRow], batch: int, nproc: int, data: str) -> float:
    return statistics.median(r.samples_per_s_per_device for r in rows
                             if (r.batch_size_per_device, r.nproc, r.data) == (batch, nproc, data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="Mahjong self-play shards")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--batch-sizes", default="256,1024,4096", help="per-device batch sizes")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/train_scaling.jsonl"))
    args = parser.parse_args()
    batches = [int(text) for text in args.batch_sizes.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="bench_train_scaling."))
    run_id = scratch.name.split(".")[-1]
    bench = {batch: run_bench(args.size, batch, scratch / f"bench-{batch}.jsonl") for batch in batches}
    rows: list[RunRow] = []
    for repeat in range(args.repeats):
        for batch in batches:
            for nproc in (1, 2):
                for synthetic in (False, True):
                    data = "synthetic" if synthetic else "real"
                    summary = run_train(args, batch, nproc, synthetic, scratch / f"r{repeat}-b{batch}-n{nproc}-{data}")
                    row = RunRow(
                        run_id=run_id, repeat=repeat, nproc=nproc, data=data, size=args.size,
                        batch_size_per_device=batch, steps=args.steps, threads_per_rank=1, loader_workers_per_rank=1,
                        steady_samples_per_s=summary["steady_samples_per_s"],
                        end_to_end_samples_per_s=summary["end_to_end_samples_per_s"],
                        samples_per_s_per_device=summary["samples_per_s_per_device"],
                        data_wait_fraction=summary["data_wait_fraction"],
                        data_wait_fraction_worst_rank=summary["data_wait_fraction_worst_rank"],
                        steady_data_wait_fraction=summary["steady_data_wait_fraction"],
                        step_time_s=summary["step_time_s"], bench_samples_per_s=bench[batch],
                    )
                    append_line(args.out, json.dumps(asdict(row)))
                    rows.append(row)
    for batch in batches:
        for nproc in (1, 2):
            real, synthetic = median_of(rows, batch, nproc, "real"), median_of(rows, batch, nproc, "synthetic")
            print(f"batch {batch}/device, {nproc} rank(s): real {real:,.1f} samples/s/device, synthetic {synthetic:,.1f}; "
                  f"IO efficiency vs synthetic {real / synthetic:.3f}, vs bench {real / bench[batch]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
