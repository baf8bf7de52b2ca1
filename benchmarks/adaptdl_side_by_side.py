"""AdaptDL's adaptive batch (`AdaptiveDataLoader.autoscale_batch_size`) to a validation goal, on a
trainspeed workload's data, as one command beside `trainspeed train --batch-schedule auto`.

    pip install adaptdl requests            # neither is trainspeed's
    python benchmarks/adaptdl_side_by_side.py --data DATA --until 'val/accuracy>=0.85' \\
        --eval-every-samples 4096 --val-samples 2048 --warmup-samples 4096 --max-samples 393216 \\
        --batch 32 --max-batch 2048 --lr 0.0003 --seed 0 --out RUN_DIR

`benchmarks/auto_vs_fixed.py` runs it as one of its configurations (`--config 'adaptdl=--adaptdl
--batch 32 ...'`), with the recipe of the others: the same data, the workload's network and
optimizer built with the seed, a linear warm-up over the same samples, a validation every
`--eval-every-samples` samples over the first `--val-samples` of the validation split (the samples
`trainspeed train --eval-batches` reads), until the goal. What AdaptDL decides is its own: one
replica (`adaptdl.torch.init_process_group("gloo")` on this host, as AdaptDL runs outside its
scheduler), `AdaptiveDataParallel` with `AdamScale` (its rule for Adam: the learning rate
scaled by its gain), and its data loader choosing the batch by its goodput model (its throughput
profile of this run and its own gradient noise scale) between `--batch` and `--max-batch`.

The whole training split is read into memory first (AdaptDL's loader indexes a map-style
dataset), which is part of the command's seconds and of its start-up here. `OUT/summary.json`
holds the fields of a trainspeed run's summary that `auto_vs_fixed.py` reads (`time_to_target`,
`startup_s`, `batch_schedule`), and `OUT/metrics.jsonl` one row per validation and per batch change.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.data.base import LoaderConfig  # noqa: E402
from trainspeed.workloads import get_workload  # noqa: E402
from trainspeed.workloads.base import setup_optimizers  # noqa: E402


class InMemory(torch.utils.data.Dataset):
    """A split's columns in memory; `__getitems__` gathers a whole batch at once (no per-sample
    collation), which the loader returns as is (`collate_fn=whole_batch`)."""

    def __init__(self, columns: dict[str, torch.Tensor]):
        self.columns = columns
        self.length = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: column[index] for name, column in self.columns.items()}

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        positions = torch.as_tensor(indices)
        return {name: column[positions] for name, column in self.columns.items()}


def whole_batch(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return batch


def read_split(workload: Any, data: str, size: str, split: str, limit: int | None) -> dict[str, torch.Tensor]:
    loader = workload.open_dataset(data, size, LoaderConfig(batch_size=4096, split=split, shuffle=False, drop_last=False,
                                                            num_workers=0))
    loader.set_epoch(0)
    parts: dict[str, list[torch.Tensor]] = {}
    count = 0
    for batch in loader:
        for name, value in batch.items():
            parts.setdefault(name, []).append(value)
        count += len(next(iter(batch.values())))
        if limit is not None and count >= limit:
            break
    columns = {name: torch.cat(values) for name, values in parts.items()}
    return {name: column[:limit] for name, column in columns.items()} if limit is not None else columns


def parse_goal(until: str) -> tuple[str, str, float]:
    for op in (">=", "<="):
        if op in until:
            name, value = until.split(op)
            return name.strip().removeprefix("val/"), op, float(value)
    raise SystemExit(f"adaptdl_side_by_side: --until {until!r}: give METRIC>=X or METRIC<=X")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adaptdl", action="store_true", help="(the marker auto_vs_fixed.py runs this script by)")
    parser.add_argument("--workload", default="mahjong")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--data", required=True)
    parser.add_argument("--until", required=True)
    parser.add_argument("--eval-every-samples", type=int, required=True)
    parser.add_argument("--val-samples", type=int, required=True)
    parser.add_argument("--warmup-samples", type=int, default=0)
    parser.add_argument("--max-samples", type=int, required=True)
    parser.add_argument("--batch", type=int, default=32, help="the batch it starts at (the smallest it may take)")
    parser.add_argument("--max-batch", type=int, default=2048)
    parser.add_argument("--lr", type=float, required=True, help="the learning rate at --batch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    metric, op, threshold = parse_goal(args.until)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("ADAPTDL_MASTER_ADDR", "127.0.0.1")
    import adaptdl.torch as adaptdl
    from adaptdl.torch.scaling_rules import AdamScale

    adaptdl.init_process_group("gloo")
    workload = get_workload(args.workload)
    train = InMemory(read_split(workload, args.data, args.size, "train", None))
    val = read_split(workload, args.data, args.size, "val", args.val_samples)
    torch.manual_seed(args.seed)
    trainable = workload.build(args.size, args.seed)
    (name,) = trainable.trained_network_names()
    setup_optimizers(trainable, False)
    optimizer = trainable.optimizers[name]
    for group in optimizer.param_groups:
        group["lr"] = args.lr
    model = adaptdl.AdaptiveDataParallel(trainable.networks[name], optimizer, scaling_rule=AdamScale())
    loader = adaptdl.AdaptiveDataLoader(train, batch_size=args.batch, shuffle=True, collate_fn=whole_batch)
    loader.autoscale_batch_size(args.max_batch, local_bsz_bounds=(args.batch, args.max_batch), gradient_accumulation=False)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    switches: list[dict[str, int]] = []
    startup_s = time.perf_counter() - STARTED
    started = time.perf_counter()
    paused = 0.0
    step = samples = 0
    next_eval = args.eval_every_samples
    batch_now: int | None = None
    goal: dict[str, Any] = {"reached": False, "best_value": None, "metric": metric, "until": args.until}
    done = False
    for _epoch in adaptdl.remaining_epochs_until(10_000):
        for batch in loader:
            size = len(next(iter(batch.values())))
            if batch_now is None:
                batch_now = size
            elif size != batch_now:
                switches.append({"to_global_batch": size, "samples": samples, "step": step})
                rows.append({"kind": "batch-change", "step": step, "samples": samples, "from": batch_now, "to": size})
                batch_now = size
            if args.warmup_samples and samples < args.warmup_samples:
                for group in optimizer.param_groups:
                    group["lr"] = args.lr * (samples + size) / args.warmup_samples
            elif args.warmup_samples:
                for group in optimizer.param_groups:
                    group["lr"] = args.lr
            optimizer.zero_grad()
            trainable.networks[name].train()
            outputs = model(batch["features"], batch["mask"], batch["action"]) if args.workload == "mahjong" else model(batch)
            loss = outputs[1] if isinstance(outputs, tuple) else outputs
            loss.backward()
            optimizer.step()
            step += 1
            samples += size
            if samples >= next_eval:
                while next_eval <= samples:
                    next_eval += args.eval_every_samples
                paused_from = time.perf_counter()
                train_s = paused_from - started - paused
                with torch.no_grad():
                    trainable.networks[name].eval()
                    totals: dict[str, torch.Tensor] = {}
                    for first in range(0, args.val_samples, 512):
                        part = {key: value[first:first + 512] for key, value in val.items()}
                        for key, value in trainable.eval_metrics(part).items():
                            totals[key] = totals.get(key, 0) + value.double()
                    metrics = trainable.summarize_eval(totals)
                value = float(metrics[metric])
                paused += time.perf_counter() - paused_from
                wall_s = time.perf_counter() - started
                rows.append({"kind": "val", "step": step, "samples": samples, "batch": size,
                             "gain": float(model.gain), "lr": optimizer.param_groups[0]["lr"], **metrics})
                better = goal["best_value"] is None or (value > goal["best_value"] if op == ">=" else value < goal["best_value"])
                if better:
                    goal["best_value"] = value
                if value >= threshold if op == ">=" else value <= threshold:
                    goal.update(reached=True, step=step, samples=samples, value=value, train_s=train_s, wall_s=wall_s)
                    done = True
                    break
            if samples >= args.max_samples:
                done = True
                break
        if done:
            break
    summary = {"kind": "adaptdl-summary", "workload": args.workload, "world_size": 1, "startup_s": startup_s,
               "global_batch": batch_now, "samples": samples, "time_to_target": goal,
               "batch_schedule": {"schedule": "adaptdl", "start_global_batch": args.batch,
                                  "final_global_batch": batch_now, "switches": switches},
               "learning_rates": {"peak": {name: args.lr}}, "adaptdl_version": _version()}
    atomic_write_text(args.out / "metrics.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=1))
    print(f"adaptdl: {'reached' if goal['reached'] else 'missed'} {args.until} at step {step}, {samples:,} samples, "
          f"batch {args.batch} -> {batch_now} ({len(switches)} changes)")


def _version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("adaptdl")
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
