"""Build a StyleGAN3 image dataset from a folder of images (`trainspeed data images`).

`trainspeed data images SRC --out DATASET.zip [--resolution R]` center-crops and resizes every
image in SRC (or, without --resolution, insists they already are square, power-of-two and equal).
The zip is written to a temporary file and renamed at the end, so a failure leaves no zip behind.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from PIL import Image

from trainspeed.atomic import atomic_path, exclusive_path
from trainspeed.errors import UsageError
from trainspeed.user_files import open_regular
from trainspeed.workloads.stylegan3.dataset import (DATASET_JSON, MIN_RESOLUTION, READ_ERRORS, check_dataset_image,
                                                    is_power_of_two, open_image, rgb8)

SOURCE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")


def list_source_images(source: Path) -> list[Path]:
    if not source.is_dir():
        raise UsageError(f"{source}: not a folder; give a folder of images (.png, .jpg, ...)")
    images = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in SOURCE_SUFFIXES)
    if not images:
        raise UsageError(f"{source}: no images found (looked for {', '.join(SOURCE_SUFFIXES)} files)")
    return images


def _decode(path: Path) -> Image.Image:
    try:
        with open_image(path, str(path)) as image:
            image.load()
            return rgb8(image, str(path))
    except READ_ERRORS as error:
        raise UsageError(f"{path}: not a readable image ({error}); remove or replace it") from None


def center_crop_resize(image: Image.Image, resolution: int) -> Image.Image:
    """The largest centred square, resampled to `resolution` (Lanczos when shrinking)."""
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    square = image.crop((left, top, left + side, top + side))
    return square if side == resolution else square.resize((resolution, resolution), Image.LANCZOS)


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def member_name(index: int) -> str:
    """dataset-tool layout: 1000 images per folder."""
    return f"{index // 1000:05d}/img{index:08d}.png"


def _check_replaceable(out: Path) -> bool:
    """Whether `out` exists and is replaced: only an image dataset this command wrote (a zip
    holding its dataset.json) is; another file at that path is refused, never overwritten."""
    if not out.exists() and not out.is_symlink():
        return False
    try:
        with open_regular(out, f"--out {out}") as handle, zipfile.ZipFile(handle) as archive:
            ours = DATASET_JSON in archive.namelist()
    except zipfile.BadZipFile:
        ours = False
    if not ours:
        raise UsageError(f"--out {out}: exists and is not an image dataset of `trainspeed data images`; give a new "
                         "path (nothing there is replaced)")
    return True


def build_image_dataset(source: Path, out: Path, resolution: int | None) -> int:
    """Write `out` (.zip) from the images under `source`; returns the image count."""
    if out.suffix.lower() != ".zip":
        raise UsageError(f"--out {out}: the dataset is written as a zip; give a path ending in .zip")
    if resolution is not None and (not is_power_of_two(resolution) or resolution < MIN_RESOLUTION):
        raise UsageError(f"--resolution {resolution}: must be a power of two >= {MIN_RESOLUTION}, e.g. 256")
    written = atomic_path(out) if _check_replaceable(out) else exclusive_path(out, f"--out {out}")  # new stays new
    sources = list_source_images(source)
    hint = "; pass --resolution R to center-crop and resize every image" if resolution is None else ""
    expected = resolution
    with written as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        for index, path in enumerate(sources):
            image = _decode(path)
            if resolution is not None:
                image = center_crop_resize(image, resolution)
            expected = check_dataset_image(str(path), image.size, expected, hint)
            archive.writestr(member_name(index), _png_bytes(image))
        archive.writestr(DATASET_JSON, json.dumps({"labels": None}))
    return len(sources)
