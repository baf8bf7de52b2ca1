"""Quality run on CPU: the small Mahjong policy on self-play data, validation accuracy vs the
majority baseline, and the loss / accuracy curves.

    python benchmarks/bench_train_quality.py --data DIR [--size small] [--steps 130 | --epochs 1]
        [--batch-size-per-device 256] [--lr 1e-3] [--eval-batches 4] [--name train_quality]

Writes OUT.json (the run summary and every validation row) and OUT.png. The training itself is `trainspeed train`; this script only fixes
its flags and draws the curves from the run's metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from trainspeed.atomic import atomic_path, atomic_write_text  # noqa: E402



def train_flags(args: argparse.Namespace) -> list[str]:
    return [
        "--workload", "mahjong", "--size", args.size, "--data", args.data, "--target", "cpu:eager:fp32",
        "--nproc", "2", "--threads", "1", "--num-workers", "1",
        "--batch-size-per-device", str(args.batch_size_per_device),
        *(["--epochs", str(args.epochs)] if args.epochs else ["--steps", str(args.steps)]),
        "--lr", str(args.lr), "--lr-scaling", "none", "--eval-every", str(args.eval_every),
        *(["--eval-batches", str(args.eval_batches)] if args.eval_batches else []),
        "--log-every", "5", "--checkpoint-every", str(args.eval_every), "--out", args.run_dir, "--no-progress",
    ] + (["--resume"] if args.resume else [])


def plot_curves(rows: list[dict], path: Path, title: str, global_batch: int) -> None:
    train = [row for row in rows if row["kind"] == "train"]
    val = [row for row in rows if row["kind"] == "val"]
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 4))
    loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train], label="train loss")
    loss_axis.plot([r["step"] for r in val], [r["loss"] for r in val], "o-", label="validation loss")
    loss_axis.set_xlabel(f"step (global batch {global_batch})")
    loss_axis.set_ylabel("cross-entropy")
    loss_axis.legend()
    accuracy_axis.plot([r["step"] for r in val], [r["accuracy"] for r in val], "o-", label="validation accuracy")
    accuracy_axis.plot([r["step"] for r in val], [r["majority_baseline"] for r in val], "--", label="majority baseline")
    accuracy_axis.set_xlabel(f"step (global batch {global_batch})")
    accuracy_axis.set_ylim(0, 1)
    accuracy_axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="self-play shards (>= 200k samples)")
    parser.add_argument("--size", default="small")
    parser.add_argument("--steps", type=int, default=130)
    parser.add_argument("--epochs", type=float, help="train for epochs instead of --steps")
    parser.add_argument("--batch-size-per-device", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--eval-batches", type=int, default=4, help="per rank; 0 = the whole validation split")
    parser.add_argument("--out", type=Path, default=Path("results/train_quality"),
                        help="output stem: OUT.json (summary + validation rows) and OUT.png")
    parser.add_argument("--run-dir", default="runs/train_quality")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    command = [sys.executable, "-m", "trainspeed", "train", *train_flags(args)]
    print(" ".join(command), flush=True)
    code = subprocess.call(command)
    if code != 0:
        return code
    rows = [json.loads(line) for line in (Path(args.run_dir) / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((Path(args.run_dir) / "summary.json").read_text())
    index = json.loads((Path(args.data) / "index.json").read_text())
    result = {
        "command": " ".join(["trainspeed", "train", *train_flags(args)]),
        "dataset_samples": sum(shard["samples"] for shard in index["shards"]),
        "summary": summary,
        "validation": [row for row in rows if row["kind"] == "val"],
    }
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    title = (f"mahjong/{args.size} on CPU, 2 ranks x batch {args.batch_size_per_device}, "
             f"{summary['samples']:,} self-play samples seen")
    plot_curves(rows, args.out.with_suffix(".png"), title, summary["global_batch"])
    print(f"wrote {args.out.with_suffix('.json')} and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
