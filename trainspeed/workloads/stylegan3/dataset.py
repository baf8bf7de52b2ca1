"""StyleGAN3's image datasets, read for one rank (`dataset_tool.py` builds them).

A dataset is a folder or an uncompressed zip of square PNGs of one power-of-two size, plus a
`dataset.json` ({"labels": null} or [[name, label], ...]): the StyleGAN dataset-tool convention,
so datasets made by either tool work with both.

The reader validates every image header when opened (cheap: PNG headers are a few bytes, and
the zip is stored, not compressed), so a bad dataset fails before training starts, naming the file.

Images are opened and turned into 8-bit RGB here for both the dataset tool and the reader, so the
two agree on what a pixel is: 16-bit grey is scaled over its full range (Pillow's own conversion
clips it at 255, which turns all but the darkest 1/256 of the range white), and a header that
claims more pixels than Pillow's decompression-bomb limit is refused before any pixel is decoded.
"""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref
import zipfile
import zlib
from pathlib import Path
from typing import IO, Iterator

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from trainspeed.data.base import Batch, LoaderConfig
from trainspeed.data.loader import (
    leave_interrupts_to_the_trainer,
    one_line_worker_error,
    worker_batches,
    worker_seed_generator,
)
from trainspeed.data.order import batches_per_epoch, rank_batches, shuffled_order
from trainspeed.errors import UsageError

DATASET_JSON = "dataset.json"
VAL_PERCENT = 5
"""Images whose name hashes (crc32) below this percentage form the "val" split."""
MIN_RESOLUTION = 8
READ_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError, zlib.error, zipfile.BadZipFile)
SIXTEEN_BIT_GREY_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
"""Pillow's modes of 16-bit grey ("I" is its 32-bit integer mode, in which it opens 16-bit PGM and
some TIFFs; values beyond 16 bits are refused rather than guessed at)."""
SIXTEEN_BIT_MAX = 65535


@contextlib.contextmanager
def open_image(source: "str | os.PathLike[str] | IO[bytes]", name: str) -> Iterator[Image.Image]:
    """`Image.open`, with a header beyond Pillow's decompression-bomb limit (`Image.MAX_IMAGE_PIXELS`)
    refused as a UsageError naming the file. Pillow only warns between the limit and twice it, and
    then decodes the lot, so its warning is raised as an error too."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(source)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
            raise UsageError(f"{name}: refused before decoding ({error}); downscale the image or remove it") from None
    with image:
        yield image


def rgb8(image: Image.Image, name: str) -> Image.Image:
    """The image as 8-bit RGB, 16-bit grey scaled over its full range (v -> round(v * 255 / 65535))."""
    if image.mode == "F":
        raise UsageError(f"{name}: floating-point pixels have no fixed range to scale to 8 bits; "
                         "save the image with 8 or 16 bits per channel")
    if image.mode not in SIXTEEN_BIT_GREY_MODES:
        return image.convert("RGB")
    values = np.asarray(image).astype(np.int64)
    if values.size and (values.min() < 0 or values.max() > SIXTEEN_BIT_MAX):
        raise UsageError(f"{name}: grey values from {values.min()} to {values.max()} do not fit 16 bits; "
                         "save the image with 8 or 16 bits per channel")
    grey = ((values * 255 + SIXTEEN_BIT_MAX // 2) // SIXTEEN_BIT_MAX).astype(np.uint8)
    return Image.fromarray(grey).convert("RGB")


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


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
            with archive.open(name) as handle, open_image(handle, archive.describe(name)) as image:
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
            with self.archive.open(name) as handle, open_image(handle, self.archive.describe(name)) as image:
                pixels = np.asarray(rgb8(image, self.archive.describe(name)))
        except READ_ERRORS as error:
            raise UsageError(f"{self.archive.describe(name)}: corrupt PNG ({error}); remove or replace it") from None
        if pixels.shape[:2] != (self.resolution, self.resolution):
            raise UsageError(f"{self.archive.describe(name)}: image changed size while reading")
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1)


def _collate(images: list[torch.Tensor]) -> Batch:
    return {"images": torch.stack(images)}


class _RemainingBatches(torch.utils.data.Sampler):
    """This rank's batches from the loader's current position to the end of its epoch, read anew at
    every iteration (the DataLoader and its workers live as long as the loader). The loader is held
    weakly, so no reference cycle leaves its shutdown to the garbage collector (see the shard loader)."""

    def __init__(self, loader: "ImageLoader") -> None:
        self._loader = weakref.ref(loader)

    def _remaining(self) -> list[np.ndarray]:
        loader = self._loader()
        order = shuffled_order(loader.num_samples, loader.config, loader.epoch)
        return rank_batches(order, loader.config)[loader.batches_consumed :]

    def __iter__(self) -> Iterator[list[int]]:
        return (batch.tolist() for batch in self._remaining())

    def __len__(self) -> int:
        return len(self._remaining())


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
        workers = config.num_workers
        self._dataloader = torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=_RemainingBatches(self),
            num_workers=workers,
            collate_fn=_collate,
            pin_memory=config.pin_memory,
            prefetch_factor=config.prefetch_batches if workers > 0 else None,
            persistent_workers=workers > 0,  # not forked anew every epoch
            worker_init_fn=leave_interrupts_to_the_trainer if workers > 0 else None,
            generator=worker_seed_generator(config),
        )

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
        try:
            for batch in worker_batches(self._dataloader):
                self.batches_consumed += 1
                yield batch
        except UsageError as error:
            raise one_line_worker_error(error) from None
