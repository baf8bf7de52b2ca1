"""Tiny data in every format `--data` reads where it lies (image folders, token files, Hugging Face
datasets, WebDataset tars), for the tests of tests/data and tests/train, and the check that one
and two ranks read the same global batches of it."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from PIL import Image

from trainspeed.data.order import SAMPLE_ID_KEY

CLASSES = ("ant", "bee", "cat")


def image_bytes(seed: int, size: tuple[int, int], fmt: str) -> bytes:
    """A small image whose mean colour says its class (seed % 3), so a model can learn it."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 60, (size[1], size[0], 3), dtype=np.uint8)
    pixels[..., seed % 3] += 150
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def write_image_folder(root: Path, per_class: int = 6, classes: tuple[str, ...] = CLASSES) -> Path:
    """ROOT/CLASS/NNN.jpg|png of mixed sizes (JPEGs and PNGs alternating)."""
    for number, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            fmt = "JPEG" if i % 2 == 0 else "PNG"
            seed = number + 3 * i
            size = (24 + 7 * (i % 4), 20 + 5 * (i % 3))
            (root / name / f"{i:03d}.{'jpg' if fmt == 'JPEG' else 'png'}").write_bytes(image_bytes(seed, size, fmt))
    return root


def corrupt(path: Path) -> None:
    """Cut a JPEG short (a truncated download), keeping its header readable."""
    path.write_bytes(path.read_bytes()[:200])


def write_tokens(path: Path, count: int, vocabulary: int = 200, seed: int = 0) -> Path:
    np.random.default_rng(seed).integers(0, vocabulary, count).astype(np.uint16).tofile(path)
    return path


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and folder under `root`: its size, mtime (ns) and sha256 (folders: their listing)."""
    state = {}
    for folder, names, files in os.walk(root):
        for name in sorted(names) + sorted(files):
            path = Path(folder) / name
            status = path.lstat()
            digest = hashlib.sha256(path.read_bytes() if path.is_file() else b"").hexdigest()
            state[str(path.relative_to(root))] = (status.st_size, status.st_mtime_ns, digest)
    return state


def add_member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_tar_shards(folder: Path, shards: int = 2, per_shard: int = 9) -> Path:
    folder.mkdir(parents=True)
    for shard in range(shards):
        with tarfile.open(folder / f"{shard:06d}.tar", "w") as archive:
            for i in range(per_shard):
                seed = shard * per_shard + i
                add_member(archive, f"{seed:06d}.jpg", image_bytes(seed, (30, 22), "JPEG"))
                add_member(archive, f"{seed:06d}.cls", str(seed % 3).encode())
    return folder


def write_hf_images(folder: Path, count: int = 12, label: str = "label") -> Path:
    import datasets

    features = datasets.Features({"image": datasets.Image(), label: datasets.ClassLabel(names=list(CLASSES))})
    rows = {"image": [{"bytes": image_bytes(i, (26, 18), "PNG"), "path": None} for i in range(count)],
            label: [i % 3 for i in range(count)]}
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(folder))
    return folder


def one_and_two_ranks(opened: Callable[..., Any], key: str, epoch: int) -> list[int]:
    """One epoch read by one rank at batch 4 and by two ranks at 2 each (`opened(batch_size=...,
    rank=..., world_size=...)` gives a loader): each global batch of the two ranks holds the one
    rank's samples, ids and `key` alike, each rank its own share. The one rank's sample ids, in order."""
    loaders = [opened(batch_size=4), opened(batch_size=2, rank=0, world_size=2), opened(batch_size=2, rank=1, world_size=2)]
    for loader in loaders:
        loader.set_epoch(epoch)
    order: list[int] = []
    for whole, first, second in zip(*loaders, strict=True):
        assert set(first[SAMPLE_ID_KEY].tolist()).isdisjoint(second[SAMPLE_ID_KEY].tolist())  # each rank its share
        by_id = {int(i): row for i, row in zip(whole[SAMPLE_ID_KEY], whole[key])}
        halves = [*zip(first[SAMPLE_ID_KEY], first[key]), *zip(second[SAMPLE_ID_KEY], second[key])]
        assert sorted(int(i) for i, _ in halves) == sorted(by_id)
        assert all(torch.equal(row, by_id[int(i)]) for i, row in halves)
        order += whole[SAMPLE_ID_KEY].tolist()
    return order
