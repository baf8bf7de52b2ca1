"""The image dataset tool (folder -> zip) and the per-rank image loader."""

from __future__ import annotations

import argparse
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from trainspeed.cli import main
from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.workloads.stylegan3.cli import add_images_command
from trainspeed.workloads.stylegan3.dataset import ImageLoader
from trainspeed.workloads.stylegan3.dataset_tool import build_image_dataset
from trainspeed.errors import UsageError


def write_image(path: Path, width: int, height: int, seed: int = 0) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def image_folder(root: Path, count: int, size: tuple[int, int] = (16, 16), suffix: str = ".png") -> Path:
    for index in range(count):
        write_image(root / f"sub{index % 2}" / f"image{index:03d}{suffix}", *size, seed=index)
    return root


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="trainspeed")
    commands = parser.add_subparsers()
    data = commands.add_parser("data").add_subparsers()
    add_images_command(data)
    args = parser.parse_args(["data", "images", *argv])
    return args.handler(args)


def test_cli_builds_a_stored_zip_of_square_pngs_with_dataset_json(tmp_path, capsys):
    source = image_folder(tmp_path / "src", 5, size=(40, 24), suffix=".jpg")
    out = tmp_path / "data.zip"
    assert run_cli([str(source), "--out", str(out), "--resolution", "16"]) == 0
    assert "wrote 5 images" in capsys.readouterr().out
    with zipfile.ZipFile(out) as archive:
        pngs = [info for info in archive.infolist() if info.filename.endswith(".png")]
        assert len(pngs) == 5 and all(info.compress_type == zipfile.ZIP_STORED for info in pngs)
        assert json.loads(archive.read("dataset.json")) == {"labels": None}
        with archive.open(pngs[0]) as handle, Image.open(handle) as image:
            assert image.size == (16, 16) and image.mode == "RGB"


def test_center_crop_keeps_the_middle(tmp_path):
    pixels = np.zeros((8, 24, 3), dtype=np.uint8)
    pixels[:, 8:16] = 255  # a white middle third on a black landscape image
    (tmp_path / "src").mkdir()
    Image.fromarray(pixels).save(tmp_path / "src" / "wide.png")
    build_image_dataset(tmp_path / "src", tmp_path / "d.zip", resolution=8)
    batch = next(iter(ImageLoader(tmp_path / "d.zip", LoaderConfig(batch_size=1, num_workers=0))))
    assert batch["images"].min() == 255


def non_square(root: Path) -> None:
    image_folder(root, 2, size=(16, 8))


def non_power_of_two(root: Path) -> None:
    image_folder(root, 2, size=(12, 12))


def mixed_sizes(root: Path) -> None:
    image_folder(root, 1, size=(16, 16))
    write_image(root / "zz" / "big.png", 32, 32)


def empty_folder(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("no images here")


def corrupt_png(root: Path) -> None:
    image_folder(root, 2)
    (root / "sub0" / "bad.png").write_bytes(b"\x89PNG not really")


@pytest.mark.parametrize(
    "make_source,resolution,expected",
    [
        (non_square, None, "16x8, not square"),
        (non_power_of_two, None, "power of two"),
        (mixed_sizes, None, "big.png: image is 32x32 but the others are 16x16"),
        (empty_folder, 16, "no images found"),
        (corrupt_png, 16, "bad.png: not a readable image"),
        (lambda root: image_folder(root, 2), 24, "--resolution 24"),
    ],
    ids=["non-square", "non-power-of-two", "mixed-sizes", "empty-folder", "corrupt-png", "bad-resolution"],
)
def test_bad_input_names_the_problem_and_leaves_no_zip(tmp_path, make_source, resolution, expected):
    source = tmp_path / "src"
    make_source(source)
    out = tmp_path / "out" / "data.zip"
    with pytest.raises(UsageError, match=expected):
        build_image_dataset(source, out, resolution)
    leftovers = list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
    assert leftovers == []


def test_truncated_png_in_a_dataset_is_named_when_read(tmp_path):
    source = image_folder(tmp_path / "src", 4)
    broken = source / "sub1" / "image001.png"
    broken.write_bytes(broken.read_bytes()[:60])  # header intact, pixel data cut
    loader = ImageLoader(source, LoaderConfig(batch_size=1, num_workers=1, shuffle=False))
    with pytest.raises(UsageError, match=r"image001\.png: corrupt PNG"):
        list(loader)


@pytest.mark.parametrize(
    "make_dataset,expected",
    [
        (non_square, r"image\d+\.png: image is 16x8, not square"),
        (non_power_of_two, r"image\d+\.png: image is 12x12; the side must be a power of two"),
        (empty_folder, "no PNG images"),
        (corrupt_png, r"bad\.png: not a readable PNG"),
    ],
    ids=["non-square", "non-power-of-two", "empty-folder", "corrupt-png"],
)
def test_loader_names_the_bad_file_when_opened(tmp_path, make_dataset, expected):
    make_dataset(tmp_path / "d")
    with pytest.raises(UsageError, match=expected):
        ImageLoader(tmp_path / "d", LoaderConfig(batch_size=1))


def test_loader_rejects_mixed_sizes_in_a_dataset_folder(tmp_path):
    image_folder(tmp_path / "d", 2)
    write_image(tmp_path / "d" / "sub9" / "odd.png", 32, 32)
    with pytest.raises(UsageError, match="odd.png: image is 32x32 but the others are 16x16"):
        ImageLoader(tmp_path / "d", LoaderConfig(batch_size=1))


def dataset(tmp_path: Path, count: int) -> Path:
    out = tmp_path / "data.zip"
    build_image_dataset(image_folder(tmp_path / "src", count), out, resolution=None)
    return out


def loader(path: Path, **overrides) -> ImageLoader:
    settings = dict(batch_size=4, num_workers=0, seed=3)
    settings.update(overrides)
    return ImageLoader(path, LoaderConfig(**settings))


def sample_ids(batch: dict) -> list[int]:
    """Images are random noise, so their pixel sums identify them."""
    return [int(image.sum()) for image in batch["images"]]


def test_zip_and_folder_read_the_same_images(tmp_path):
    out = dataset(tmp_path, 24)
    extracted = tmp_path / "extracted"
    with zipfile.ZipFile(out) as archive:
        archive.extractall(extracted)
    from_zip, from_folder = loader(out), loader(extracted)
    assert isinstance(from_zip, BatchLoader)
    assert [sample_ids(b) for b in from_zip] == [sample_ids(b) for b in from_folder]
    assert from_zip.resolution == 16


def test_batches_are_uint8_and_each_train_image_is_read_once_per_epoch(tmp_path):
    images = loader(dataset(tmp_path, 40))
    batches = list(images)
    assert len(batches) == len(images) == images.num_samples // 4
    assert all(b["images"].dtype == torch.uint8 and b["images"].shape == (4, 3, 16, 16) for b in batches)
    ids = [i for b in batches for i in sample_ids(b)]
    assert len(set(ids)) == len(ids)


def test_val_and_train_splits_are_disjoint_and_cover_the_dataset(tmp_path):
    path = dataset(tmp_path, 60)
    train = loader(path, batch_size=1, shuffle=False)
    val = loader(path, batch_size=1, shuffle=False, split="val")
    assert train.num_samples + val.num_samples == 60 and val.num_samples > 0
    assert not set(i for b in train for i in sample_ids(b)) & set(i for b in val for i in sample_ids(b))


def test_order_depends_on_seed_and_epoch_only(tmp_path):
    path = dataset(tmp_path, 24)
    first, again = loader(path), loader(path)
    epoch0 = [sample_ids(b) for b in first]
    assert epoch0 == [sample_ids(b) for b in again]
    first.set_epoch(1)
    assert [sample_ids(b) for b in first] != epoch0


def test_ranks_take_slices_of_the_same_global_batches(tmp_path):
    path = dataset(tmp_path, 40)
    single = [sample_ids(b) for b in loader(path, batch_size=8, num_workers=1)]
    ranks = [[sample_ids(b) for b in loader(path, batch_size=4, rank=r, world_size=2)] for r in range(2)]
    assert [r0 + r1 for r0, r1 in zip(*ranks)] == single


def test_resume_mid_epoch_continues_without_repeats_or_gaps(tmp_path):
    path = dataset(tmp_path, 40)
    full = [sample_ids(b) for b in loader(path)]
    interrupted = loader(path)
    stream = iter(interrupted)
    head = [sample_ids(next(stream)) for _ in range(3)]
    state = interrupted.state_dict()
    resumed = loader(path)
    resumed.load_state_dict(state)
    assert head + [sample_ids(b) for b in resumed] == full


def test_keeping_the_last_partial_batch_splits_it_across_ranks(tmp_path):
    path = dataset(tmp_path, 24)
    total = loader(path, batch_size=1).num_samples
    seen = []
    for rank in range(2):
        seen += [i for b in loader(path, batch_size=5, rank=rank, world_size=2, drop_last=False) for i in sample_ids(b)]
    assert len(seen) == total


def test_loader_workers_persist_across_epochs(tmp_path, child_pids):
    images = loader(dataset(tmp_path, 40), batch_size=4, num_workers=2)
    before = child_pids()
    first = [sample_ids(batch) for batch in images]
    workers = child_pids() - before
    assert len(workers) == 2
    images.set_epoch(1)
    second = [sample_ids(batch) for batch in images]
    assert child_pids() - before == workers and first != second


def dataset_pixels(path: Path) -> np.ndarray:
    """Every image of a dataset as uint8 (N, R, R, 3), in name order."""
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".png"))
        return np.stack([np.asarray(Image.open(archive.open(name))) for name in names])


GREY_16 = (np.arange(32 * 32, dtype=np.uint32).reshape(32, 32) * 64 + 63).astype(np.uint16)
"""A 16-bit grey ramp from 63 to 65535 over a 32x32 image."""


@pytest.mark.parametrize("suffix, dtype", [(".png", np.uint16), (".tif", ">u2")], ids=["png", "big-endian-tiff"])
def test_16_bit_grey_keeps_its_full_range(tmp_path, capsys, suffix, dtype):
    source = tmp_path / "src"
    source.mkdir()
    Image.fromarray(GREY_16.astype(dtype)).save(source / f"ramp{suffix}")
    with Image.open(source / f"ramp{suffix}") as written:
        assert written.mode in ("I;16", "I;16B")  # really 16 bits per pixel on disk
    assert main(["data", "images", str(source), "--out", str(tmp_path / "d.zip")]) == 0
    (pixels,) = dataset_pixels(tmp_path / "d.zip")
    expected = np.round(GREY_16 / 257.0).astype(np.uint8)  # 65535 / 255 = 257: full scale to full scale
    assert (pixels == expected[..., None]).all()
    assert pixels.min() == 0 and pixels.max() == 255 and (pixels == 255).mean() < 0.01


def test_a_dataset_folder_of_16_bit_pngs_reads_with_the_full_range_as_the_tool_writes_it(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    Image.fromarray(GREY_16).save(folder / "ramp.png")
    build_image_dataset(folder, tmp_path / "d.zip", resolution=None)
    (from_folder,) = next(iter(loader(folder, batch_size=1)))["images"]
    pixels = from_folder.permute(1, 2, 0).numpy()
    assert (pixels == np.round(GREY_16 / 257.0).astype(np.uint8)[..., None]).all()
    assert (pixels == dataset_pixels(tmp_path / "d.zip")[0]).all()


def with_claimed_size(width: int, height: int) -> bytes:
    """A valid 8x8 PNG whose header (IHDR, CRC fixed up) claims width x height pixels."""
    buffer = io.BytesIO()
    Image.new("L", (8, 8)).save(buffer, format="PNG")
    png = bytearray(buffer.getvalue())
    header = struct.pack(">II", width, height) + bytes(png[24:29])
    png[16:29] = header
    png[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + header))
    return bytes(png)


@pytest.mark.parametrize("width, height", [(100_000, 100_000), (10_000, 10_000)],
                         ids=["beyond-the-error-limit", "between-warning-and-error"])
def test_a_decompression_bomb_header_is_one_line_and_the_old_dataset_stays(tmp_path, cli_error, width, height):
    source = image_folder(tmp_path / "src", 2)
    out = tmp_path / "d.zip"
    build_image_dataset(source, out, resolution=None)
    before = out.read_bytes()
    (source / "sub0" / "bomb.png").write_bytes(with_claimed_size(width, height))
    line = cli_error("data", "images", str(source), "--out", str(out), "--resolution", "16")
    assert f"bomb.png: refused before decoding (Image size ({width * height} pixels) exceeds limit of" in line, line
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["d.zip", "src"]


def test_a_dataset_holding_a_bomb_header_is_refused_when_opened(tmp_path):
    folder = image_folder(tmp_path / "d", 2)
    (folder / "sub1" / "bomb.png").write_bytes(with_claimed_size(100_000, 100_000))
    with pytest.raises(UsageError, match=r"bomb\.png: refused before decoding \(Image size \(10000000000 pixels\)"):
        ImageLoader(folder, LoaderConfig(batch_size=1))


@pytest.mark.parametrize("pixels, fragment", [
    (np.tile(np.array([0, 70_000], dtype=np.int32), (8, 4)), "grey values from 0 to 70000 do not fit 16 bits"),
    (np.full((8, 8), 0.5, dtype=np.float32), "floating-point pixels have no fixed range"),
], ids=["32-bit-integer", "float"])
def test_grey_without_a_known_range_is_refused_not_clipped(tmp_path, cli_error, pixels, fragment):
    source = tmp_path / "src"
    source.mkdir()
    Image.fromarray(pixels).save(source / "wide.tif")
    line = cli_error("data", "images", str(source), "--out", str(tmp_path / "d.zip"))
    assert "wide.tif: " in line and fragment in line, line
    assert not (tmp_path / "d.zip").exists()
