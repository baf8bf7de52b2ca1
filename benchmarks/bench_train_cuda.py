"""One CUDA device: training with real data vs the same loop without IO vs the bench, per batch size.

    python benchmarks/bench_train_cuda.py [--data DIR] [--target cuda:eager:bf16] [--size base]
        [--batch-sizes 512,8192] [--steps 40] [--num-workers 4] [--out results/train_cuda.jsonl]

Without --data it first makes self-play shards (`trainspeed data mahjong-selfplay`, all cores).
For each batch size: `trainspeed bench` (no IO), `trainspeed train --synthetic-data` and
`trainspeed train --data`, one after the other; appends one row per batch size to
--out with steady samples/s, data-wait fraction, H2D time and the IO
efficiency against the bench and against the synthetic run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from trainspeed.atomic import append_line


def trainspeed(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "trainspeed", *args], check=True)


def make_selfplay(scratch: Path, games: int) -> Path:
    out = scratch / "selfplay"
    trainspeed("data", "mahjong-selfplay", "--games", str(games), "--workers", str(os.cpu_count() or 1),
               "--out", str(out), "--seed", "0", "--no-progress")
    return out


def bench(args: argparse.Namespace, batch: int, out: Path) -> float:
    trainspeed("bench", "--workload", "mahjong", "--size", args.size, "--targets", args.target,
               "--batch-sizes", str(batch), "--out", str(out), "--no-plot", "--no-progress")
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return float(rows[-1]["samples_per_s"])


def train(args: argparse.Namespace, batch: int, data: list[str], bench_path: Path, run_dir: Path) -> dict:
    trainspeed("train", "--workload", "mahjong", "--size", args.size, *data, "--target", args.target,
               "--batch-size-per-device", str(batch), "--steps", str(args.steps), "--num-workers",
               str(args.num_workers), "--threads", "4", "--timing-warmup-steps", "10", "--log-every", "10",
               "--bench-jsonl", str(bench_path), "--out", str(run_dir), "--no-progress")
    return json.loads((run_dir / "summary.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data")
    parser.add_argument("--games", type=int, default=300, help="self-play games to make without --data")
    parser.add_argument("--target", default="cuda:eager:bf16")
    parser.add_argument("--size", default="base")
    parser.add_argument("--batch-sizes", default="512,8192")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("results/train_cuda.jsonl"), help="JSONL rows are appended to")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_train_cuda."))
    data_dir = Path(args.data) if args.data else make_selfplay(scratch, args.games)
    for batch in (int(text) for text in args.batch_sizes.split(",")):
        bench_path = scratch / f"bench-{batch}.jsonl"
        bench_samples_per_s = bench(args, batch, bench_path)
        synthetic = train(args, batch, ["--synthetic-data"], bench_path, scratch / f"synthetic-{batch}")
        real = train(args, batch, ["--data", str(data_dir)], bench_path, scratch / f"real-{batch}")
        row = {
            "target": args.target, "size": args.size, "batch_size": batch, "steps": args.steps,
            "num_workers": args.num_workers, "bench_samples_per_s": bench_samples_per_s,
            "synthetic_samples_per_s": synthetic["steady_samples_per_s"],
            "real_samples_per_s": real["steady_samples_per_s"],
            "real_end_to_end_samples_per_s": real["end_to_end_samples_per_s"],
            "data_wait_fraction": real["data_wait_fraction"],
            "steady_data_wait_fraction": real.get("steady_data_wait_fraction"), "h2d_s_per_step": real["h2d_s_per_step"],
            "io_efficiency_vs_bench": real["io_efficiency"],
            "io_efficiency_vs_synthetic": real["steady_samples_per_s"] / synthetic["steady_samples_per_s"],
        }
        append_line(args.out, json.dumps(row))
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
