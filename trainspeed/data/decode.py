"""One image from its bytes to uint8 (3, res, res): decoded, cropped, resized and flipped on a
loader worker, the way torchvision's ImageNet recipe does it, in one resampling.

Training: a random-resized crop (area 8%..100% of the image, aspect 3/4..4/3, torchvision's
`RandomResizedCrop` drawing: ten tries, then the centre crop of the nearest allowed aspect) resized
to `res`, flipped left-right with probability 1/2. Validation: the shorter side resized to
`res / 0.875` and the centre `res` x `res` cut out (timm's and torchvision's 0.875 crop).

Speed: the crop box is drawn from the header's size before any pixel is decoded, and a JPEG whose
box is at least twice `res` on its shorter side is decoded at 1/2, 1/4 or 1/8 scale by libjpeg's
DCT scaling (Pillow's `Image.draft`): a 2048 px photo trained at 64 px decodes 1/64 of its pixels.
Pillow's `resize` with a `box` then crops and resizes in one pass (antialiased, bilinear).

The draws come from a generator of (seed, epoch, sample), never from a process's global RNG, so a
sample's crop and flip are the same whichever worker, rank or resumed run reads it.

A file Pillow cannot decode (truncated, corrupt, not an image, past the decompression-bomb limit)
is a `BadSample`, which the loader refuses or skips as told (`trainspeed.data.samples`).
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
import zlib
from dataclasses import dataclass
from typing import IO, Iterator

import numpy as np
from PIL import Image, UnidentifiedImageError

CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3.0 / 4.0, 4.0 / 3.0)
CENTRE_CROP_FRACTION = 0.875
DRAFT_FACTOR = 2.0
"""Decode at reduced scale only where the crop is at least this many times `res` on its shorter
side (libjpeg's scales are 1/2, 1/4, 1/8)."""
DECODE_ERRORS = (UnidentifiedImageError, OSError, SyntaxError, ValueError, zlib.error, EOFError,
                 Image.DecompressionBombError, Image.DecompressionBombWarning)


class BadSample(Exception):
    """A sample that cannot be read: its name (file, or archive and member) and why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class ImagePlan:
    """How every image of a split becomes a batch entry."""

    resolution: int
    train: bool
    """Random-resized crop and flip (training), or resize and centre crop (validation)."""
    draft: bool = True
    """Decode JPEGs at reduced scale where the crop allows it (off: always decode in full)."""


Box = tuple[float, float, float, float]
"""(left, top, right, bottom) in pixels of the full image."""


def random_resized_box(width: int, height: int, rng: np.random.Generator) -> Box:
    """torchvision's RandomResizedCrop box (module docstring), drawn from `rng`."""
    area = width * height
    log_ratio = (math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1]))
    for _ in range(10):
        target_area = area * rng.uniform(*CROP_SCALE)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return (left, top, left + w, top + h)
    ratio = width / height
    if ratio < CROP_RATIO[0]:
        w, h = width, int(round(width / CROP_RATIO[0]))
    elif ratio > CROP_RATIO[1]:
        h, w = height, int(round(height * CROP_RATIO[1]))
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return (left, top, left + w, top + h)


def centre_box(width: int, height: int, resolution: int) -> Box:
    """The region of the full image that resize-shorter-side-to-res/0.875 then centre-crop-res keeps."""
    side = min(width, height) * resolution / int(resolution / CENTRE_CROP_FRACTION)
    left, top = (width - side) / 2, (height - side) / 2
    return (left, top, left + side, top + side)


def open_checked(source: IO[bytes], name: str) -> Image.Image:
    """`Image.open`, with a header past Pillow's decompression-bomb limit an error, not a warning
    (Pillow only warns between the limit and twice it, and then decodes the lot)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return Image.open(source)
        except DECODE_ERRORS as error:
            raise BadSample(name, _reason(error)) from None


def _reason(error: BaseException) -> str:
    if isinstance(error, UnidentifiedImageError):
        return "not an image (no format Pillow reads)"
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"not a readable image ({text[:160]})"


@contextlib.contextmanager
def decoding(source: IO[bytes] | bytes, name: str) -> Iterator[Image.Image]:
    """The image opened (`open_checked`) for what the block decodes of it: past the decompression-
    bomb limit an error there too, every decoding error a BadSample naming it, the file closed."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(source)
    image = open_checked(source, name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield image
    except DECODE_ERRORS as error:
        raise BadSample(name, _reason(error)) from None
    finally:
        image.close()


def decode_image(source: IO[bytes] | bytes, name: str, plan: ImagePlan, rng: np.random.Generator | None,
                 out: np.ndarray) -> None:
    """Decode one image into `out` (uint8 (3, res, res)), as the plan says; BadSample if it cannot."""
    with decoding(source, name) as image:
        _decode_into(image, plan, rng, out)


def _decode_into(image: Image.Image, plan: ImagePlan, rng: np.random.Generator | None, out: np.ndarray) -> None:
    width, height = image.size
    if width < 1 or height < 1:
        raise ValueError(f"an image of {width}x{height} pixels")
    res = plan.resolution
    if plan.train:
        assert rng is not None
        box = random_resized_box(width, height, rng)
        flip = bool(rng.integers(0, 2))
    else:
        box, flip = centre_box(width, height, res), False
    shorter = min(box[2] - box[0], box[3] - box[1])
    if plan.draft and image.format == "JPEG" and shorter >= DRAFT_FACTOR * res:
        scale = shorter / res
        image.draft("RGB", (max(1, math.ceil(width / scale)), max(1, math.ceil(height / scale))))
        sx, sy = image.size[0] / width, image.size[1] / height
        box = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
    if image.mode != "RGB":
        image = image.convert("RGB")
    resized = image.resize((res, res), Image.Resampling.BILINEAR, box=box)
    pixels = np.asarray(resized).transpose(2, 0, 1)
    out[...] = pixels[:, :, ::-1] if flip else pixels


def check_image(source: IO[bytes] | bytes, name: str) -> None:
    """Decode the whole image (at reduced scale for a JPEG: every byte is still parsed), so a
    truncated or corrupt file is found; BadSample if it is one."""
    with decoding(source, name) as image:
        if image.format == "JPEG":
            image.draft("RGB", (max(1, image.size[0] // 8), max(1, image.size[1] // 8)))
        image.load()


def sample_rng(seed: int, epoch: int, sample: int) -> np.random.Generator:
    """The generator of one sample's augmentation in one epoch."""
    return np.random.default_rng([seed, epoch, sample, 0x1A6E])
