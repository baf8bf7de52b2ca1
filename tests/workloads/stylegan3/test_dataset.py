"""The image dataset tool (folder -> zip) and the per-rank image loader."""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

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
