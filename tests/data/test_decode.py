"""One image from its bytes to a batch entry (`trainspeed.data.decode`): draft-mode decode of a
JPEG far larger than the resolution, PNG and JPEG, crops that repeat for a (seed, epoch, sample),
and a file Pillow cannot read named as a bad sample, never a traceback."""

from __future__ import annotations

import io

import numpy as np
import pytest
from in_place_data import image_bytes
from PIL import Image

from trainspeed.data.decode import (
    BadSample,
    ImagePlan,
    centre_box,
    check_image,
    decode_image,
    random_resized_box,
    sample_rng,
)

RES = 16


def _smooth(size: tuple[int, int], fmt: str, mode: str = "RGB") -> bytes:
    """A gradient, so a draft decode at reduced scale is near the full one."""
    x = np.linspace(0, 255, size[0], dtype=np.float32)
    y = np.linspace(0, 255, size[1], dtype=np.float32)
    pixels = np.stack([np.add.outer(y, x) / 2, np.broadcast_to(x, (size[1], size[0])),
                       np.broadcast_to(y[:, None], (size[1], size[0]))], axis=-1).astype(np.uint8)
    image = Image.fromarray(pixels).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _decoded(data: bytes, plan: ImagePlan, epoch: int = 0, sample: int = 0) -> np.ndarray:
    out = np.empty((3, plan.resolution, plan.resolution), np.uint8)
    decode_image(data, "photo", plan, sample_rng(1, epoch, sample) if plan.train else None, out)
    return out


@pytest.mark.parametrize("train", [False, True], ids=["val", "train"])
def test_a_jpeg_far_above_the_resolution_decodes_in_draft_mode_near_the_full_decode(train: bool) -> None:
    big = _smooth((256, 192), "JPEG")
    draft, full = _decoded(big, ImagePlan(RES, train)), _decoded(big, ImagePlan(RES, train, draft=False))
    assert draft.shape == full.shape == (3, RES, RES)
    assert not np.array_equal(draft, full)  # decoded at reduced scale by libjpeg, not in full
    assert np.abs(draft.astype(int) - full.astype(int)).mean() < 6


def test_a_png_and_a_jpeg_near_the_resolution_decode_in_full_either_way() -> None:
    for data in (_smooth((256, 192), "PNG"), _smooth((20, 20), "JPEG"), _smooth((40, 30), "PNG", mode="L")):
        for train in (False, True):
            assert np.array_equal(_decoded(data, ImagePlan(RES, train)), _decoded(data, ImagePlan(RES, train, draft=False)))


def test_validation_is_the_centre_crop_and_training_crops_repeat_per_seed_epoch_and_sample() -> None:
    data = image_bytes(4, (60, 40), "PNG")
    val = ImagePlan(RES, train=False)
    assert np.array_equal(_decoded(data, val), _decoded(data, val))
    assert centre_box(60, 40, RES) == pytest.approx((10 + 40 * (1 - RES / 18) / 2, 40 * (1 - RES / 18) / 2,
                                                     50 - 40 * (1 - RES / 18) / 2, 40 - 40 * (1 - RES / 18) / 2))
    train = ImagePlan(RES, train=True)
    crops = {epoch: _decoded(data, train, epoch=epoch) for epoch in range(4)}
    assert np.array_equal(crops[0], _decoded(data, train, epoch=0))  # whichever worker or resumed run reads it
    assert len({crop.tobytes() for crop in crops.values()}) == 4  # a new crop (and flip) each epoch


def test_an_image_too_thin_for_any_crop_gets_the_centre_of_the_nearest_aspect() -> None:
    rng = np.random.default_rng(0)
    assert random_resized_box(64, 2, rng) == (30, 0, 33, 2)  # wider than 4:3
    assert random_resized_box(2, 64, rng) == (0, 30, 2, 33)  # taller than 3:4
    out = np.empty((3, RES, RES), np.uint8)
    decode_image(image_bytes(2, (64, 2), "PNG"), "strip", ImagePlan(RES, train=True), sample_rng(0, 0, 0), out)


@pytest.mark.parametrize(("data", "said"), [
    pytest.param(b"plain text, not pixels", "strip.png: not an image (no format Pillow reads)", id="not-an-image"),
    pytest.param(_smooth((64, 64), "JPEG")[:300], "strip.png: not a readable image (", id="truncated-jpeg"),
    pytest.param(_smooth((64, 64), "PNG")[:100], "strip.png: not a readable image (", id="truncated-png"),
])
def test_a_file_pillow_cannot_decode_is_a_bad_sample_naming_it(data: bytes, said: str) -> None:
    for plan in (ImagePlan(RES, train=True), ImagePlan(RES, train=False, draft=False)):
        with pytest.raises(BadSample) as raised:
            decode_image(data, "strip.png", plan, sample_rng(0, 0, 0), np.empty((3, RES, RES), np.uint8))
        assert str(raised.value).startswith(said) and raised.value.name == "strip.png"
    with pytest.raises(BadSample, match="^strip.png: not a"):
        check_image(data, "strip.png")


def test_an_image_past_the_decompression_bomb_limit_is_a_bad_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _smooth((64, 64), "PNG")
    check_image(data, "ok.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 3000)  # 64 x 64 is past the limit, short of twice it
    with pytest.raises(BadSample, match="bomb.png: not a readable image"):
        check_image(data, "bomb.png")
    with pytest.raises(BadSample, match=r"photo: not a readable image \(Image size \(4096 pixels\) exceeds limit"):
        _decoded(data, ImagePlan(RES, train=False))
