"""Data read where it lies (image folders, token files, Hugging Face datasets, WebDataset tars):
the global order for any rank count, exact resume, bad input in one line, bad images refused or
skipped, the user's folder left as it was."""

from __future__ import annotations

import dataclasses
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from in_place_data import (CLASSES, add_member, one_and_two_ranks, corrupt, image_bytes, snapshot, write_hf_images, write_image_folder,
                           write_tar_shards, write_tokens)

from trainspeed.data.base import LoaderConfig
from trainspeed.data.in_place import open_images, open_tokens
from trainspeed.data.sources import detect_format
from trainspeed.data.tokens import window_count
from trainspeed.data.verify_in_place import summarize_in_place, verify_in_place
from trainspeed.errors import UsageError

RES = 12
SAMPLE_ID = "meta_sample_id"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_image_folder(tmp_path / "photos")


def _ids_and_pixels(path: Path, **config) -> list[tuple[np.ndarray, torch.Tensor]]:
    loader = open_images(path, LoaderConfig(**config), RES).loader
    return [(batch["meta_sample_id"].numpy(), batch["images"]) for batch in loader]


def test_every_image_once_per_epoch_and_two_ranks_read_the_global_batches_of_one(folder: Path) -> None:
    one = _ids_and_pixels(folder, batch_size=4, num_workers=0, seed=3)
    ranks = [_ids_and_pixels(folder, batch_size=2, rank=r, world_size=2, num_workers=0, seed=3) for r in (0, 1)]
    total = open_images(folder, LoaderConfig(batch_size=4), RES).loader.num_samples
    read = np.concatenate([ids for ids, _ in one])
    assert len(set(read.tolist())) == len(read) == total - total % 4 and set(read.tolist()) <= set(range(total))
    for (ids, pixels), (ids0, pixels0), (ids1, pixels1) in zip(one, *ranks):
        assert set(ids0).isdisjoint(ids1)  # each rank reads only its share
        together = dict(zip([*ids0, *ids1], [*pixels0, *pixels1]))
        assert sorted(together) == sorted(ids)
        for sample, image in zip(ids, pixels):  # the same crop and flip, whoever reads the sample
            assert torch.equal(together[sample], image)
    assert pixels.dtype == torch.uint8 and pixels.shape[1:] == (3, RES, RES)


def test_a_loader_resumed_mid_epoch_reads_what_the_uninterrupted_one_does(folder: Path) -> None:
    config = LoaderConfig(batch_size=3, num_workers=1, seed=5)
    whole = open_images(folder, config, RES).loader
    whole.set_epoch(1)
    expected = list(whole)
    first = open_images(folder, config, RES).loader
    first.set_epoch(1)
    batches = iter(first)
    for _ in range(2):
        next(batches)
    state = first.state_dict()
    resumed = open_images(folder, dataclasses.replace(config, num_workers=0), RES).loader
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(expected) - 2
    for got, want in zip(rest, expected[2:]):
        assert all(torch.equal(got[key], want[key]) for key in want)


def test_reading_changes_nothing_in_the_users_folder(folder: Path, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.bin", 400)
    before = snapshot(folder), snapshot(tmp_path / "photos")
    list(open_images(folder, LoaderConfig(batch_size=4, num_workers=1), RES).loader)
    assert verify_in_place(folder).is_ok
    summarize_in_place(folder)
    list(open_tokens(tokens, LoaderConfig(batch_size=4), 9).loader)
    verify_in_place(tokens)
    assert (snapshot(folder), snapshot(tmp_path / "photos")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos", "tokens.bin"]


@pytest.mark.parametrize("policy", ["refuse", "skip"])
def test_a_truncated_jpeg_is_refused_in_one_line_or_skipped_and_counted(folder: Path, policy: str,
                                                                        capfd: pytest.CaptureFixture) -> None:
    config = LoaderConfig(batch_size=4, num_workers=1, bad_samples=policy, drop_last=False)
    loader = open_images(folder, config, RES).loader
    damaged = folder / loader.reader.paths[0]  # a training image, read in every epoch
    corrupt(damaged)
    if policy == "refuse":
        with pytest.raises(UsageError) as raised:
            list(loader)
        assert len(str(raised.value).splitlines()) == 1
        assert str(raised.value).startswith(f"{damaged}: not a readable image")
        assert "--bad-samples skip" in str(raised.value)
        return
    batches = list(loader)
    assert sum(len(batch["labels"]) for batch in batches) == loader.num_samples
    assert loader.data_record()["skipped"] == 1
    warning = capfd.readouterr().err
    assert f"warning: {damaged}: not a readable image" in warning and "Traceback" not in warning


@pytest.mark.parametrize(("make", "said"), [
    pytest.param(lambda root: (root / "cat").mkdir(), "cat: an empty class folder", id="empty-class-folder"),
    pytest.param(lambda root: (root / "ant" / "x.txt").write_text("-"), None, id="only-other-files-are-fine"),
    pytest.param(lambda root: (root / "dog.jpg").mkdir(), "dog.jpg: a class folder named like an image file",
                 id="class-folder-named-like-a-file"),
    pytest.param(lambda root: (root / "stray.png").write_bytes(image_bytes(0, (9, 9), "PNG")),
                 "stray.png: an image directly in", id="image-in-no-class"),
    pytest.param(lambda root: os.symlink(root, root / "ant" / "again"), "a symlink loop", id="symlink-loop"),
    pytest.param(lambda root: os.symlink(root / "ant" / "self", root / "ant" / "self"), "a symlink loop",
                 id="symlink-to-itself"),
])
def test_an_image_folder_layout_problem_is_one_line_before_any_image_is_read(tmp_path: Path, make, said) -> None:
    root = write_image_folder(tmp_path / "photos", per_class=2, classes=("ant", "bee"))
    make(root)
    if said is None:
        assert open_images(root, LoaderConfig(batch_size=1), RES).classes == 2
        return
    with pytest.raises(UsageError) as raised:
        open_images(root, LoaderConfig(batch_size=1), RES)
    assert said in str(raised.value) and len(str(raised.value).splitlines()) == 1


def test_a_folder_without_images_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "photos" / "ant").mkdir(parents=True)
    (tmp_path / "photos" / "ant" / "notes.txt").write_text("no images here")
    with pytest.raises(UsageError, match=r"no images at all in its 1 class folder\(s\)"):
        open_images(tmp_path / "photos", LoaderConfig(batch_size=1), RES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="an empty folder"):
        detect_format(tmp_path / "empty")


def test_a_val_tree_is_the_validation_split(folder: Path) -> None:
    (folder / "val" / "bee").mkdir(parents=True)
    (folder / "val" / "bee" / "v.png").write_bytes(image_bytes(1, (20, 20), "PNG"))
    val = open_images(folder, LoaderConfig(batch_size=1, split="val"), RES)
    assert val.classes == len(CLASSES) and val.loader.num_samples == 1
    assert next(iter(val.loader))["labels"].tolist() == [CLASSES.index("bee")]
    assert open_images(folder, LoaderConfig(batch_size=1), RES).loader.num_samples == 3 * 6


def test_token_windows_share_one_id_and_the_last_five_percent_are_validation(tmp_path: Path) -> None:
    path = tmp_path / "tokens.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    train = open_tokens(path, LoaderConfig(batch_size=5, shuffle=False, drop_last=False), 9)
    val = open_tokens(path, LoaderConfig(batch_size=5, split="val", drop_last=False), 9)
    windows = window_count(1000, 9)
    assert train.id_range == (0, 999) and train.loader.num_samples + val.loader.num_samples == windows
    assert val.loader.num_samples == -(-windows * 5 // 100)
    first = next(iter(train.loader))["tokens"]
    assert first.dtype == torch.int32 and first[0].tolist() == list(range(9)) and first[1, 0] == 8
    last = max(int(batch["tokens"].max()) for batch in val.loader)
    assert last == 8 * windows


def test_a_token_file_that_is_not_whole_ids_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "odd.bin").write_bytes(b"\x01\x02\x03")
    with pytest.raises(UsageError, match=r"3 bytes is not a whole number of uint16 ids"):
        open_tokens(tmp_path / "odd.bin", LoaderConfig(batch_size=1), 4)
    np.save(tmp_path / "floats.npy", np.zeros(10, np.float32))
    with pytest.raises(UsageError, match="a token file holds one row of integer ids"):
        open_tokens(tmp_path / "floats.npy", LoaderConfig(batch_size=1), 4)


def test_data_verify_names_token_ids_past_the_vocabulary(tmp_path: Path) -> None:
    folder = tmp_path / "text"
    folder.mkdir()
    write_tokens(folder / "train.bin", 500, vocabulary=300)
    np.save(folder / "val.npy", np.arange(50, dtype=np.uint16))
    assert verify_in_place(folder).is_ok
    report = verify_in_place(folder, vocabulary=256)
    assert not report.is_ok and "train.bin: token id" in report.problems[0] and "past --vocab" in report.problems[0]


def test_a_hugging_face_image_dataset_reads_as_an_image_folder_does(tmp_path: Path) -> None:
    path = write_hf_images(tmp_path / "hf")
    before = snapshot(path)
    opened = open_images(path, LoaderConfig(batch_size=4, num_workers=1), RES)
    assert opened.classes == 3
    batches = list(opened.loader)
    assert sum(len(b["labels"]) for b in batches) == 12 - 12 % 4
    assert all(b["images"].shape[1:] == (3, RES, RES) for b in batches)
    assert opened.loader.data_record()["format"] == "hf-dataset"
    assert verify_in_place(path).is_ok
    assert snapshot(path) == before


def test_a_hugging_face_dataset_without_the_needed_column_is_one_line(tmp_path: Path) -> None:
    path = write_hf_images(tmp_path / "hf", label="target")
    with pytest.raises(UsageError, match=r"hf: no label column \(label or labels\); its columns are image, target"):
        open_images(path, LoaderConfig(batch_size=1), RES)
    with pytest.raises(UsageError, match=r"hf: no token id column \(input_ids or tokens\)"):
        open_tokens(path, LoaderConfig(batch_size=1), 4)


def test_tar_shards_read_their_samples_and_a_member_that_is_no_sample_is_one_line(tmp_path: Path) -> None:
    shards = write_tar_shards(tmp_path / "tars")
    opened = open_images(shards, LoaderConfig(batch_size=4, num_workers=1), RES)
    assert opened.classes == 3 and opened.loader.num_samples == 18
    ids = np.concatenate([batch["meta_sample_id"].numpy() for batch in opened.loader])
    assert len(set(ids.tolist())) == len(ids) == 16
    with tarfile.open(shards / "000002.tar", "w") as archive:
        add_member(archive, "000100.jpg", image_bytes(0, (9, 9), "JPEG"))
        add_member(archive, "000100.cls", b"1")
        add_member(archive, "LICENSE", b"text")
    with pytest.raises(UsageError, match="member 'LICENSE' has no KEY.EXTENSION name"):
        open_images(shards, LoaderConfig(batch_size=1), RES)


def test_a_token_batch_reads_its_windows_not_the_whole_file(tmp_path: Path) -> None:
    import tracemalloc

    path = write_tokens(tmp_path / "big.bin", 2_000_000)  # 4 MB of ids
    batches = iter(open_tokens(path, LoaderConfig(batch_size=4, num_workers=0), 65).loader)
    next(batches)
    tracemalloc.start()
    try:
        next(batches)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"one batch of 4 windows allocated {peak:,} bytes"


@pytest.mark.parametrize("data", ["tokens", "tar-shards", "hf-dataset"])
def test_one_and_two_ranks_read_the_same_global_batches_of_every_format(tmp_path: Path, data: str) -> None:
    if data == "tokens":
        path = write_tokens(tmp_path / "tokens.bin", 600)
        def opened(**config):
            return open_tokens(path, LoaderConfig(num_workers=0, seed=4, **config), 9).loader
    else:
        path = write_tar_shards(tmp_path / "tars") if data == "tar-shards" else write_hf_images(tmp_path / "hf")
        def opened(**config):
            return open_images(path, LoaderConfig(num_workers=0, seed=4, **config), RES).loader
    key = "tokens" if data == "tokens" else "images"
    for epoch in (0, 1):
        order = one_and_two_ranks(opened, key, epoch)
        assert len(order) == 4 * len(opened(batch_size=4)) > 0


@pytest.mark.parametrize("data", ["token-file", "hf-token-dataset"])
def test_token_windows_of_each_format_take_a_new_order_each_epoch_split_over_ranks_and_resume_exactly(
        tmp_path: Path, data: str) -> None:
    if data == "token-file":
        path = write_tokens(tmp_path / "tokens.bin", 400)
    else:
        datasets = pytest.importorskip("datasets")
        datasets.disable_progress_bars()
        path = tmp_path / "hf"
        datasets.Dataset.from_dict({"input_ids": [list(range(i, i + 100)) for i in range(0, 400, 100)]}).save_to_disk(
            str(path))

    def opened(**config):
        return open_tokens(path, LoaderConfig(num_workers=0, seed=9, **config), 9).loader

    orders = []
    for epoch in (0, 1):
        order = one_and_two_ranks(opened, "tokens", epoch)
        assert len(set(order)) == len(order) == len(opened(batch_size=4)) * 4
        orders.append(order)
    assert orders[0] != orders[1]
    interrupted = opened(batch_size=4)
    interrupted.set_epoch(1)
    batches = iter(interrupted)
    next(batches), next(batches)
    resumed = opened(batch_size=4)
    resumed.load_state_dict(interrupted.state_dict())
    whole = opened(batch_size=4)
    whole.set_epoch(1)
    rest = list(whole)[2:]
    for got, want in zip(resumed, rest, strict=True):
        assert torch.equal(got["tokens"], want["tokens"]) and torch.equal(got[SAMPLE_ID], want[SAMPLE_ID])
