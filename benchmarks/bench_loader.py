"""Loader throughput from page cache: samples/s with 0, 1, 2 background workers, one or many ranks.

    .venv/bin/python benchmarks/bench_loader.py [--data DIR] [--games 96] [--batch-sizes 1024]
        [--workers 0 1 2] [--ranks 1] [--pin-memory] [--device cuda] [--check-data on off] [--out FILE.jsonl]

Without --data it first makes a self-play shard folder (cached under /tmp). Each configuration
runs one warm-up epoch (page cache, memory maps) and then `--epochs` timed epochs; a row reports the
median epoch's samples/s (wall) and samples per CPU second of all processes (main + workers), the
"per core" rate. With `--ranks N`, N processes each run rank r of N at the same time (as data-
parallel training would) and the row reports their total. `--device cuda` also copies every batch to
the GPU (non_blocking from pinned memory with --pin-memory) and syncs at each epoch's end.

`--check-data on off` measures each configuration with the loader's data checks and without them
(`LoaderConfig.check_data`): per batch the action ids and masks are checked in the timed epochs;
each shard whose bytes changed since they were written is hashed once per run, at its first read,
which lands in the untimed first epoch (its seconds are in `first_epoch_s`). `--time-checks` also
times the per-batch checks on their own against the time the loader takes to make each batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import resource
import shlex
import shutil
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.data.base import LoaderConfig
from trainspeed.data.shards import SHARD_PREFIX, read_index
from trainspeed.machine import Machine
from trainspeed.rows import row_line
from trainspeed.user_json import loads
from trainspeed.workloads.mahjong.data.loader import open_mahjong_shards
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA, write_mahjong_index


@dataclass(frozen=True)
class LoaderRow:
    ranks: int
    num_workers: int
    batch_size: int
    pin_memory: bool
    device: str
    check_data: bool
    samples_per_epoch: int
    epochs: int
    samples_per_s: float
    samples_per_s_spread: tuple[float, float]
    samples_per_cpu_s: float
    bytes_per_sample: int
    cpu_count: int
    first_epoch_s: float
    """The untimed first epoch (page cache, memory maps, the once-per-run shard checks)."""
    repeat: int = 0


@dataclass(frozen=True)
class RankTiming:
    samples: list[int]
    starts: list[float]
    ends: list[float]
    cpu_seconds: list[float]
    first_epoch_s: float = 0.0


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # workers, once joined at epoch end
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_rank(folder: Path, config: LoaderConfig, epochs: int, device: str, barrier=None) -> RankTiming:
    """Epoch timings of one rank; with a barrier, all ranks start each epoch together."""
    torch.set_num_threads(1)
    loader = open_mahjong_shards(folder, config)
    timing = RankTiming([], [], [], [])
    for epoch in range(epochs + 1):
        loader.set_epoch(epoch)
        if barrier is not None:
            barrier.wait()
        start, cpu_start, samples = time.monotonic(), _cpu_seconds(), 0  # monotonic: comparable across processes
        for batch in loader:
            if device != "cpu":
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            samples += len(batch["action"])
        if device != "cpu":
            torch.cuda.synchronize()
        if epoch == 0:  # epoch 0 warms the page cache and the memory maps
            first_epoch_s = time.monotonic() - start
        else:
            timing.samples.append(samples)
            timing.starts.append(start)
            timing.ends.append(time.monotonic())
            timing.cpu_seconds.append(_cpu_seconds() - cpu_start)
    return dataclasses.replace(timing, first_epoch_s=first_epoch_s)


def _time_rank(args: tuple) -> RankTiming:
    return time_rank(*args)


def measure(folder: Path, ranks: int, num_workers: int, batch_size: int, epochs: int,
            pin_memory: bool, device: str, check_data: bool) -> LoaderRow:
    configs = [LoaderConfig(batch_size=batch_size, rank=r, world_size=ranks, num_workers=num_workers,
                            prefetch_batches=4, pin_memory=pin_memory, check_data=check_data) for r in range(ranks)]
    if ranks == 1:
        timings = [time_rank(folder, configs[0], epochs, device)]
    else:
        # executor processes may start DataLoader workers (a multiprocessing.Pool's may not)
        context = multiprocessing.get_context("spawn")
        with context.Manager() as manager, ProcessPoolExecutor(ranks, mp_context=context) as pool:
            barrier = manager.Barrier(ranks)
            timings = list(pool.map(_time_rank, [(folder, c, epochs, device, barrier) for c in configs]))
    per_epoch = [sum(t.samples[e] for t in timings) for e in range(epochs)]
    wall = [max(t.ends[e] for t in timings) - min(t.starts[e] for t in timings) for e in range(epochs)]
    cpu = [sum(t.cpu_seconds[e] for t in timings) for e in range(epochs)]
    rates = [s / w for s, w in zip(per_epoch, wall)]
    return LoaderRow(
        ranks=ranks, num_workers=num_workers, batch_size=batch_size, pin_memory=pin_memory, device=device,
        check_data=check_data, first_epoch_s=max(t.first_epoch_s for t in timings),
        samples_per_epoch=per_epoch[0], epochs=epochs, samples_per_s=statistics.median(rates),
        samples_per_s_spread=(min(rates), max(rates)),
        samples_per_cpu_s=statistics.median([s / c for s, c in zip(per_epoch, cpu)]),
        bytes_per_sample=read_index(folder, MAHJONG_SCHEMA)["bytes_per_sample"], cpu_count=os.cpu_count() or 0)


def print_check_cost(rows: list[LoaderRow]) -> None:
    """Per configuration: the median over repeats of samples/s with the data checks over without them."""
    keys = sorted({(r.ranks, r.batch_size, r.num_workers) for r in rows})
    for ranks, batch_size, workers in keys:
        def median_rate(check: bool) -> float:
            return statistics.median(r.samples_per_s for r in rows
                                     if (r.ranks, r.batch_size, r.num_workers, r.check_data) == (ranks, batch_size, workers, check))
        print(f"ranks {ranks} workers {workers} batch {batch_size}: with checks / without = "
              f"{median_rate(True) / median_rate(False):.3f} (median of {max(r.repeat for r in rows) + 1} repeats)")


def time_checks(folder: Path, batch_size: int, epochs: int) -> dict:
    """The per-batch checks timed on their own: for each batch of `epochs` epochs (one worker-less
    loader without checks), the seconds the loader took to make it and the seconds the workload's
    checks take on it. Steadier than the ratio of two loader runs, which memory traffic of other
    jobs moves by several percent either way."""
    loader = open_mahjong_shards(folder, LoaderConfig(batch_size=batch_size, num_workers=0, check_data=False))
    check_rows = loader.spec.check_rows
    load_s, check_s = [], []
    for epoch in range(epochs + 1):
        loader.set_epoch(epoch)
        batches = iter(loader)
        while True:
            start = time.perf_counter()
            batch = next(batches, None)
            made = time.perf_counter()
            if batch is None:
                break
            columns = {name: batch[name].numpy() for name in ("action", "mask")}
            problems = check_rows(folder, np.arange(len(columns["action"])), columns)
            checked = time.perf_counter()
            assert not problems, problems
            if epoch > 0:  # epoch 0 warms the page cache
                load_s.append(made - start)
                check_s.append(checked - made)
    load, check = statistics.median(load_s), statistics.median(check_s)
    return {"batch_size": batch_size, "batches": len(load_s), "load_s_per_batch": load,
            "check_s_per_batch": check, "check_fraction": check / load}


def replicate(folder: Path, copies: int) -> Path:
    """A bigger shard folder made of `copies` copies of `folder`'s shards (same games repeated):
    loader speed does not depend on which games, and a host without the engine can run this."""
    target = Path(f"/tmp/trainspeed-bench-replicated-{copies}")
    if (target / "index.json").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    for copy in range(copies):
        for sidecar in sorted(folder.glob(f"{SHARD_PREFIX}*.json")):
            info = loads(sidecar.read_text())
            name = f"{SHARD_PREFIX}{copy:04d}-{sidecar.stem[len(SHARD_PREFIX):]}"
            shutil.copyfile(folder / info["file"], target / f"{name}.bin")
            atomic_write_text(target / f"{name}.json", json.dumps({**info, "file": f"{name}.bin"}))
    write_mahjong_index(target, extra={"source": {"replicated": str(folder), "copies": copies}})
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--games", type=int, default=96)
    parser.add_argument("--selfplay-workers", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1])
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--replicate", type=int, default=1, help="use this many copies of the data")
    parser.add_argument("--check-data", nargs="+", choices=("on", "off"), default=["on"],
                        help="with the loader's data checks, without them, or both side by side")
    parser.add_argument("--repeats", type=int, default=1, help="run every configuration this often, interleaved")
    parser.add_argument("--time-checks", action="store_true",
                        help="also time the per-batch data checks on their own (a check-cost row per batch size)")
    parser.add_argument("--out", type=Path, default=Path("results/loader_bench.jsonl"))
    args = parser.parse_args(argv)
    if args.pin_memory and not args.device.startswith("cuda"):
        parser.error("--pin-memory pins batches for copies to a GPU; use it with --device cuda")
    torch.set_num_threads(1)
    machine = Machine.at_start()
    command = shlex.join(["python", "benchmarks/bench_loader.py", *(sys.argv[1:] if argv is None else argv)])
    folder = args.data
    if folder is None:
        from trainspeed.workloads.mahjong.data.selfplay import (  # needs the engine
            SelfPlayConfig,
            run_selfplay,
        )

        folder = Path(f"/tmp/trainspeed-bench-selfplay-{args.games}")
        run_selfplay(SelfPlayConfig(games=args.games, out=folder, seed=0, workers=args.selfplay_workers,
                                    progress=False))
    if args.replicate > 1:
        folder = replicate(folder, args.replicate)
    rows = []
    configurations = [(ranks, batch_size, workers) for ranks in args.ranks for batch_size in args.batch_sizes
                      for workers in args.workers]
    for repeat in range(args.repeats):
        checks = args.check_data if repeat % 2 == 0 else args.check_data[::-1]  # neither side always first
        for (ranks, batch_size, workers), check in ((c, check) for c in configurations for check in checks):
            row = dataclasses.replace(measure(folder, ranks, workers, batch_size, args.epochs, args.pin_memory,
                                              args.device, check == "on"), repeat=repeat)
            rows.append(row)
            print(f"ranks {row.ranks} workers {row.num_workers} batch {row.batch_size} checks {check}: "
                  f"{row.samples_per_s:,.0f} samples/s (spread {row.samples_per_s_spread[0]:,.0f}-"
                  f"{row.samples_per_s_spread[1]:,.0f}), {row.samples_per_cpu_s:,.0f} samples per "
                  f"CPU-second, {row.samples_per_epoch} samples per epoch, first epoch {row.first_epoch_s:.2f} s",
                  flush=True)
    if args.check_data == ["on", "off"] or args.check_data == ["off", "on"]:
        print_check_cost(rows)
    records = [MeasurementRow.of("loader", row, command, machine.at_end()) for row in rows]
    if args.time_checks:
        for batch_size in args.batch_sizes:
            cost = time_checks(folder, batch_size, args.epochs)
            print(f"batch {batch_size}: the checks take {cost['check_s_per_batch'] * 1e6:,.0f} us of a batch the loader "
                  f"makes in {cost['load_s_per_batch'] * 1e6:,.0f} us ({cost['check_fraction']:.1%}; medians of "
                  f"{cost['batches']} batches)")
            records.append(MeasurementRow.of("loader-check-cost", cost, command, machine.at_end()))
    atomic_write_text(args.out, "".join(row_line(record) + "\n" for record in records))


if __name__ == "__main__":
    main()
