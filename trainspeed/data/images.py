"""Image datasets for StyleGAN3: build one from a folder of images, and read one for a rank.

A dataset is a folder or an uncompressed zip of square PNGs of one power-of-two size, plus a
`dataset.json` ({"labels": null} or [[name, label], ...]): the StyleGAN dataset-tool convention,
so datasets made by either tool work with both.

`trainspeed data images SRC --out DATASET.zip [--resolution R]` center-crops and resizes every
image in SRC (or, without --resolution, insists they already are square, power-of-two and equal).
The zip is written to a temporary file and renamed at the end, so a failure leaves no zip behind.

The reader validates every image header when opened (cheap: PNG headers are a few bytes, and
the zip is stored, not compressed), so a bad dataset fails before training starts, naming the file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import zipfile
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from trainspeed.atomic import atomic_path
from trainspeed.data.base import LoaderConfig
from trainspeed.data.order import batches_per_epoch, rank_batches, shuffled_order
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch

SOURCE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")
DATASET_JSON = "dataset.json"
VAL_PERCENT = 5
"""Images whose name hashes (crc32) below this percentage form the "val" split."""
MIN_RESOLUTION = 8
READ_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError, zlib.error, zipfile.BadZipFile)


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


# --- building a dataset ---------------------------------------------------------------------------


def list_source_images(source: Path) -> list[Path]:
    if not source.is_dir():
        raise UsageError(f"{source}: not a folder; give a folder of images (.png, .jpg, ...)")
    images = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in SOURCE_SUFFIXES)
    if not images:
        raise UsageError(f"{source}: no images found (looked for {', '.join(SOURCE_SUFFIXES)} files)")
    return images


def _decode(path: Path) -> Image.Image:
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert("RGB")
    except READ_ERRORS as error:
        raise UsageError(f"{path}: not a readable image ({error}); remove or replace it") from None


def center_crop_resize(image: Image.Image, resolution: int) -> Image.Image:
    """The largest centred square, resampled to `resolution` (Lanczos when shrinking)."""
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    square = image.crop((left, top, left + side, top + side))
    return square if side == resolution else square.resize((resolution, resolution), Image.LANCZOS)


def check_dataset_image(name: str, size: tuple[int, int], expected: int | None, hint: str) -> int:
    """The image's side length, or a UsageError naming it if it is not square, 2^k and as expected."""
    width, height = size
    if width != height:
        raise UsageError(f"{name}: image is {width}x{height}, not square{hint}")
    if not is_power_of_two(width) or width < MIN_RESOLUTION:
        raise UsageError(f"{name}: image is {width}x{height}; the side must be a power of two >= {MIN_RESOLUTION}{hint}")
    if expected is not None and width != expected:
        raise UsageError(f"{name}: image is {width}x{height} but the others are {expected}x{expected}{hint}")
    return width


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def member_name(index: int) -> str:
    """dataset-tool layout: 1000 images per folder."""
    return f"{index // 1000:05d}/img{index:08d}.png"


def build_image_dataset(source: Path, out: Path, resolution: int | None) -> int:
    """Write `out` (.zip) from the images under `source`; returns the image count."""
    if out.suffix.lower() != ".zip":
        raise UsageError(f"--out {out}: the dataset is written as a zip; give a path ending in .zip")
    if resolution is not None and (not is_power_of_two(resolution) or resolution < MIN_RESOLUTION):
        raise UsageError(f"--resolution {resolution}: must be a power of two >= {MIN_RESOLUTION}, e.g. 256")
    sources = list_source_images(source)
    hint = "; pass --resolution R to center-crop and resize every image" if resolution is None else ""
    expected = resolution
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        for index, path in enumerate(sources):
            image = _decode(path)
            if resolution is not None:
                image = center_crop_resize(image, resolution)
            expected = check_dataset_image(str(path), image.size, expected, hint)
            archive.writestr(member_name(index), _png_bytes(image))
        archive.writestr(DATASET_JSON, json.dumps({"labels": None}))
    return len(sources)


def add_images_command(data_subparsers) -> None:
    parser = data_subparsers.add_parser(
        "images",
        help="build a StyleGAN image dataset (zip of PNGs + dataset.json) from a folder of images",
        description="Center-crop and resize every image under SRC and store them as an uncompressed zip of PNGs.",
    )
    parser.add_argument("source", type=Path, metavar="SRC", help="folder of images (searched recursively)")
    parser.add_argument("--out", type=Path, required=True, metavar="DATASET.zip", help="zip file to write")
    parser.add_argument("--resolution", type=int, default=None, help="side length (power of two); default: keep")
    parser.set_defaults(handler=run_images_command)


def run_images_command(args: argparse.Namespace) -> int:
    count = build_image_dataset(args.source, args.out, args.resolution)
    print(f"wrote {count} images to {args.out}")
    return 0


# --- reading a dataset ----------------------------------------------------------------------------


class ImageArchive:
    """The PNGs of a dataset folder or zip, by name; a zip is reopened in each worker process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.is_zip = path.is_file()
        self._zip: zipfile.ZipFile | None = None
        self._zip_pid = -1
        if not path.exists():
            raise UsageError(f"{path}: no such dataset; build one with `trainspeed data images SRC --out {path}`")
        if self.is_zip and not zipfile.is_zipfile(path):
            raise UsageError(f"{path}: not a zip file; give a dataset folder or a .zip of PNGs")
        self.names = sorted(n for n in self._all_names() if n.lower().endswith(".png"))
        if not self.names:
            raise UsageError(f"{path}: no PNG images; build a dataset with `trainspeed data images SRC --out DATASET.zip`")

    def _all_names(self) -> list[str]:
        if self.is_zip:
            return self._archive().namelist()
        return [p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if p.is_file()]

    def _archive(self) -> zipfile.ZipFile:
        if self._zip is None or self._zip_pid != os.getpid():
            self._zip = zipfile.ZipFile(self.path)
            self._zip_pid = os.getpid()
        return self._zip

    def describe(self, name: str) -> str:
        return f"{self.path}:{name}" if self.is_zip else str(self.path / name)

    def open(self, name: str):
        return self._archive().open(name) if self.is_zip else open(self.path / name, "rb")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_zip": None, "_zip_pid": -1}


def _validated_resolution(archive: ImageArchive) -> int:
    expected = None
    for name in archive.names:
        try:
            with archive.open(name) as handle, Image.open(handle) as image:
                size = image.size
        except READ_ERRORS as error:
            raise UsageError(f"{archive.describe(name)}: not a readable PNG ({error}); remove or replace it") from None
        expected = check_dataset_image(archive.describe(name), size, expected, "")
    assert expected is not None
    return expected


def in_val_split(name: str) -> bool:
    return zlib.crc32(name.encode("utf-8")) % 100 < VAL_PERCENT


class ImageDataset(torch.utils.data.Dataset):
    """Decoded images as uint8 (3, R, R) tensors."""

    def __init__(self, archive: ImageArchive, names: list[str], resolution: int) -> None:
        self.archive = archive
        self.names = names
        self.resolution = resolution

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index: int) -> torch.Tensor:
        name = self.names[index]
        try:
            with self.archive.open(name) as handle, Image.open(handle) as image:
                pixels = np.asarray(image.convert("RGB"))
        except READ_ERRORS as error:
            raise UsageError(f"{self.archive.describe(name)}: corrupt PNG ({error}); remove or replace it") from None
        if pixels.shape[:2] != (self.resolution, self.resolution):
            raise UsageError(f"{self.archive.describe(name)}: image changed size while reading")
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1)


def _collate(images: list[torch.Tensor]) -> Batch:
    return {"images": torch.stack(images)}


class _ResumeSampler(torch.utils.data.Sampler):
    def __init__(self, batches: list[np.ndarray]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[list[int]]:
        return (batch.tolist() for batch in self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def _clean_worker_error(error: UsageError) -> UsageError:
    """A DataLoader worker's error arrives with its traceback glued on; keep our one line."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    last = lines[-1] if lines else str(error)
    return UsageError(last.split("UsageError: ", 1)[-1])


class ImageLoader:
    """The BatchLoader of an image dataset: {"images": uint8 (B, 3, R, R)} for one rank.

    The order is a permutation seeded by (seed, epoch) (`trainspeed.data.order.shuffled_order`);
    global batch t is cut into world_size contiguous slices and this rank takes slice `rank`.
    """

    def __init__(self, path: "os.PathLike[str] | str", config: LoaderConfig) -> None:
        if config.split not in ("train", "val"):
            raise UsageError(f"split {config.split!r}: use 'train' or 'val'")
        archive = ImageArchive(Path(path))
        self.resolution = _validated_resolution(archive)
        names = [n for n in archive.names if in_val_split(n) == (config.split == "val")]
        if not names:
            raise UsageError(f"{path}: the {config.split} split is empty ({len(archive.names)} images in all, {VAL_PERCENT}% go to val)")
        self.dataset = ImageDataset(archive, names, self.resolution)
        self.config = config
        self.epoch = 0
        self.batches_consumed = 0

    @property
    def num_samples(self) -> int:
        return len(self.dataset)

    def __len__(self) -> int:
        return batches_per_epoch(self.num_samples, self.config)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches_consumed = 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batches_consumed": self.batches_consumed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self.batches_consumed = int(state["batches_consumed"])

    def __iter__(self) -> Iterator[Batch]:
        order = shuffled_order(self.num_samples, self.config, self.epoch)
        remaining = rank_batches(order, self.config)[self.batches_consumed :]
        workers = self.config.num_workers
        loader = torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=_ResumeSampler(remaining),
            num_workers=workers,
            collate_fn=_collate,
            pin_memory=self.config.pin_memory,
            prefetch_factor=self.config.prefetch_batches if workers > 0 else None,
        )
        try:
            for batch in loader:
                self.batches_consumed += 1
                yield batch
        except UsageError as error:
            raise _clean_worker_error(error) from None
