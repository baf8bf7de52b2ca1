"""Data read where it lies, against what users run today: three comparisons, each side by side in
one process, interleaved, every row with the machine and its load.

    .venv/bin/python benchmarks/bench_data_in_place.py [--images 20000] [--folder /tmp/...]
        [--res 64] [--workers 2] [--batch-size 64] [--batches 30] [--repeats 3] [--out docs/results/data_in_place]

1. `image-folder`: trainspeed's image-folder loader (`--data ROOT`) against torchvision's
   `ImageFolder` + `DataLoader`, the same training transforms (random-resized crop to `--res`,
   horizontal flip, uint8 CHW), the same batch and workers; samples/s over `--batches` batches after
   the first (the workers' start-up). Goal: trainspeed / torchvision >= 1.0.
2. `draft-decode`: one process decoding JPEGs of 256 px and more at 64 px (validation: resize and
   centre crop) with JPEG draft mode (`ImagePlan(draft=True)`) against a full decode
   (`draft=False`), from bytes already in memory, per CPU second of the decoding thread. Goal: >= 2x.
3. `tokens`: the memory-mapped token reader (`--data FILE.bin`, windows of block + 1 ids) against
   nanoGPT's `get_batch` (a fresh `np.memmap` per batch, random offsets, a stack of int64 slices),
   each in the main process at one batch and block.

The JPEG folder (`--images` of mixed sizes, 256..640 px a side, 10 classes) and the token file are
made once under /tmp and reused; nothing is written into the repository but `--out`'s
`.jsonl` (one `measurement` row per comparison and repeat), `.csv` and `.png`/`.svg`.
"""

from __future__ import annotations

import argparse
import csv
import io
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from matplotlib.ticker import FuncFormatter
from PIL import Image

from trainspeed.atomic import atomic_write_text
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.data.base import LoaderConfig
from trainspeed.data.decode import ImagePlan, decode_image
from trainspeed.data.in_place import open_images, open_tokens
from trainspeed.machine import Machine
from trainspeed.report.figures import caption_machines, plt, save_figure
from trainspeed.rows import parse_row, read_records, row_line

CLASSES = 10
SIDES = (256, 640)
CANVAS = 704
GOALS = {"image-folder": 1.0, "draft-decode": 2.0, "tokens": 1.0}


def _canvas(number: int) -> np.ndarray:
    """A 704 px square per class: gradients, a texture and some noise (about 1.5 bits per pixel at
    quality 90, like a web photo; not white noise, which no photo is)."""
    rng = np.random.default_rng(number)
    y, x = np.mgrid[0:CANVAS, 0:CANVAS]
    texture = 40 * np.sin(x / (7 + number % 5)) * np.cos(y / (11 + number % 3))
    base = (np.stack([x * 255 // CANVAS, y * 255 // CANVAS, (x + y) * 127 // (2 * CANVAS)], -1)
            + texture[..., None] + rng.integers(0, 12, (CANVAS, CANVAS, 3)) + number * 20)
    return np.clip(base, 0, 255).astype(np.uint8)


def _write_images(job: tuple[Path, int, int]) -> None:
    """Images start..stop: a crop of its class's canvas at a random place and size (256..640 a side)."""
    root, start, stop = job
    canvases = [_canvas(number) for number in range(CLASSES)]
    for number in range(start, stop):
        rng = np.random.default_rng(number)
        width, height = (int(side) for side in rng.integers(SIDES[0], SIDES[1] + 1, 2))
        left, top = (int(at) for at in rng.integers(0, CANVAS - SIDES[1], 2))
        pixels = canvases[number % CLASSES][top:top + height, left:left + width]
        Image.fromarray(pixels).save(root / f"class{number % CLASSES:02d}" / f"{number:06d}.jpg", quality=90)


def jpeg_folder(root: Path, images: int) -> Path:
    """ROOT/classNN/NNNNNN.jpg of mixed sizes, made once (a marker file says it is complete)."""
    marker = root / f".complete-{images}"
    if marker.exists():
        return root
    for number in range(CLASSES):
        (root / f"class{number:02d}").mkdir(parents=True, exist_ok=True)
    chunks = [(root, start, min(start + 500, images)) for start in range(0, images, 500)]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_write_images, chunks))
    marker.write_text("")
    return root


def token_file(path: Path, ids: int) -> Path:
    if not path.exists() or path.stat().st_size != 2 * ids:
        np.random.default_rng(0).integers(0, 50257, ids).astype(np.uint16).tofile(path.with_suffix(".tmp"))
        path.with_suffix(".tmp").rename(path)
    return path


def timed_batches(batches, count: int) -> tuple[int, float]:
    """(samples, seconds) of `count` batches after the first."""
    iterator = iter(batches)
    next(iterator)
    started, samples = time.perf_counter(), 0
    for _ in range(count):
        batch = next(iterator)
        samples += len(batch["images"] if isinstance(batch, dict) else batch[0])
    return samples, time.perf_counter() - started


def trainspeed_images(root: Path, res: int, workers: int, batch_size: int, batches: int, seed: int) -> float:
    loader = open_images(root, LoaderConfig(batch_size=batch_size, num_workers=workers, seed=seed), res).loader
    samples, seconds = timed_batches(loader, batches)
    del loader
    return samples / seconds


def torchvision_images(root: Path, res: int, workers: int, batch_size: int, batches: int, seed: int) -> float:
    from torchvision import datasets, transforms

    transform = transforms.Compose([transforms.RandomResizedCrop(res), transforms.RandomHorizontalFlip(),
                                    transforms.PILToTensor()])
    dataset = datasets.ImageFolder(str(root), transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         generator=torch.Generator().manual_seed(seed))
    samples, seconds = timed_batches(loader, batches)
    del loader
    return samples / seconds


def decode_rate(blobs: list[bytes], draft: bool, res: int = 64) -> float:
    """Images per CPU second of this thread: one thread decodes, and on a shared machine its wall
    time counts the other jobs' turns on the core too."""
    plan, out = ImagePlan(res, train=False, draft=draft), np.empty((3, res, res), np.uint8)
    started = time.thread_time()
    for number, blob in enumerate(blobs):
        decode_image(blob, str(number), plan, None, out)
    return len(blobs) / (time.thread_time() - started)


def trainspeed_tokens(path: Path, block: int, batch_size: int, batches: int) -> float:
    loader = open_tokens(path, LoaderConfig(batch_size=batch_size, num_workers=0), block + 1).loader
    iterator, started = iter(loader), time.perf_counter()
    samples = sum(len(next(iterator)["tokens"]) for _ in range(batches))
    return samples / (time.perf_counter() - started)


def nanogpt_tokens(path: Path, block: int, batch_size: int, batches: int) -> float:
    """nanoGPT's train.py `get_batch` (CPU): a new memmap per batch (it leaks otherwise), random offsets."""
    started = time.perf_counter()
    for _ in range(batches):
        data = np.memmap(path, dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - block, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i + block]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block]).astype(np.int64)) for i in ix])
        del x, y
    return batches * batch_size / (time.perf_counter() - started)


def comparison(benchmark: str, ours: float, theirs: float, against: str, unit: str, **settings) -> dict:
    return {"comparison": benchmark, "trainspeed": ours, against: theirs, "ratio": ours / theirs,
            "goal_ratio": GOALS[benchmark], "meets_goal": ours / theirs >= GOALS[benchmark], "unit": unit,
            "torch_threads": torch.get_num_threads(), **settings}


def figure(records: list[MeasurementRow], stem: Path) -> list[Path]:
    """Each comparison's median ratio (its repeats as dots) against its goal."""
    names = list(GOALS)
    figure_, axes = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    for x, name in enumerate(names):
        ratios = [record.values["ratio"] for record in records if record.values["comparison"] == name]
        if not ratios:
            continue
        axes.bar(x, statistics.median(ratios), color="tab:blue", alpha=0.7)
        axes.plot([x] * len(ratios), ratios, "o", color="black", markersize=3)
        axes.plot([x - 0.4, x + 0.4], [GOALS[name]] * 2, "--", color="tab:red")
    axes.set_xticks(range(len(names)), ["vs torchvision\nImageFolder", "draft vs full\nJPEG decode at 64 px",
                                        "memmap reader vs\nnanoGPT get_batch"])
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    axes.set_ylabel("trainspeed / other (samples/s, log)")
    axes.set_title("data read where it lies: median ratio (dots: repeats; dashed: goal)", fontsize=9)
    axes.grid(True, axis="y", alpha=0.3)
    caption_machines(figure_, records)
    return save_figure(figure_, stem)


def write_csv(records: list[MeasurementRow], path: Path) -> None:
    names = list(dict.fromkeys(name for record in records for name in record.values))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["benchmark", *names, "load_average_start", "load_average_end",
                                                "cores_usable", "cpu_model"])
    writer.writeheader()
    for record in records:
        machine = record.machine
        writer.writerow({"benchmark": record.benchmark, **record.values,
                         "load_average_start": machine.load_average_start, "load_average_end": machine.load_average_end,
                         "cores_usable": machine.cores_usable, "cpu_model": machine.cpu_model})
    atomic_write_text(path, buffer.getvalue())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--folder", type=Path, default=None, help="default: /tmp/trainspeed-jpegs-IMAGES")
    parser.add_argument("--res", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--decode-images", type=int, default=400)
    parser.add_argument("--tokens", type=int, default=20_000_000)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--token-batches", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("docs/results/data_in_place"), help="stem of the files")
    parser.add_argument("--plot-only", action="store_true", help="draw the figure again from --out's .jsonl")
    args = parser.parse_args(argv)
    if args.plot_only:
        figure([parse_row(MeasurementRow, record, source)[0] for record, source in
                read_records(args.out.with_suffix(".jsonl"))], args.out)
        return
    torch.set_num_threads(args.threads)
    command = shlex.join(["python", "benchmarks/bench_data_in_place.py", *(sys.argv[1:] if argv is None else argv)])
    root = jpeg_folder(args.folder or Path(f"/tmp/trainspeed-jpegs-{args.images}"), args.images)
    tokens = token_file(Path(f"/tmp/trainspeed-tokens-{args.tokens}.bin"), args.tokens)
    blobs = [path.read_bytes() for path in sorted(root.glob("class*/*.jpg"))[:args.decode_images]]
    records: list[MeasurementRow] = []
    settings = dict(images=args.images, res=args.res, workers=args.workers, batch_size=args.batch_size,
                    batches=args.batches)
    for repeat in range(args.repeats):
        first_ours = repeat % 2 == 0  # neither side always first
        machine = Machine.at_start()
        runs = [("trainspeed", trainspeed_images), ("torchvision", torchvision_images)]
        rates = {name: run(root, args.res, args.workers, args.batch_size, args.batches, repeat)
                 for name, run in (runs if first_ours else runs[::-1])}
        records.append(MeasurementRow.of("data-in-place", comparison(
            "image-folder", rates["trainspeed"], rates["torchvision"], "torchvision", "samples/s", repeat=repeat,
            **settings), command, machine.at_end()))
        machine = Machine.at_start()
        draft, full = (decode_rate(blobs, True), decode_rate(blobs, False)) if first_ours else \
            tuple(reversed((decode_rate(blobs, False), decode_rate(blobs, True))))
        records.append(MeasurementRow.of("data-in-place", comparison(
            "draft-decode", draft, full, "full_decode", "images per CPU s", repeat=repeat, images=len(blobs), res=64,
            sides=f"{SIDES[0]}-{SIDES[1]} px"), command, machine.at_end()))
        machine = Machine.at_start()
        ours = trainspeed_tokens(tokens, args.block, args.batch_size, args.token_batches)
        theirs = nanogpt_tokens(tokens, args.block, args.batch_size, args.token_batches)
        records.append(MeasurementRow.of("data-in-place", comparison(
            "tokens", ours, theirs, "nanogpt_get_batch", "samples/s", repeat=repeat, tokens=args.tokens,
            block=args.block, batch_size=args.batch_size, batches=args.token_batches), command, machine.at_end()))
        for record in records[-3:]:
            values = record.values
            print(f"repeat {repeat} {values['comparison']}: trainspeed {values['trainspeed']:,.0f} {values['unit']}, "
                  f"ratio {values['ratio']:.2f} (goal {values['goal_ratio']}), load "
                  f"{record.machine.load_average_end}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".jsonl"), "".join(row_line(record) + "\n" for record in records))
    write_csv(records, args.out.with_suffix(".csv"))
    figure(records, args.out)
    for name in GOALS:
        ratios = [record.values["ratio"] for record in records if record.values["comparison"] == name]
        print(f"{name}: median ratio {statistics.median(ratios):.2f} over {len(ratios)} repeats (goal {GOALS[name]})")


if __name__ == "__main__":
    main()
