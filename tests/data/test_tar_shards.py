"""WebDataset tar shards read where they lie: image + class samples or token windows, splits by
shard name or 5% by position, the chunked order for any rank count, exact resume, and every tar
that is not one of samples refused in one line. In the test's process, on a few members."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from in_place_data import add_member, image_bytes, one_and_two_ranks, snapshot, write_tar_shards

from trainspeed.data.base import LoaderConfig
from trainspeed.data.in_place import open_images, open_tokens
from trainspeed.data.order import SAMPLE_ID_KEY
from trainspeed.data.sources import WEBDATASET
from trainspeed.data.tar_shards import open_tar_shards
from trainspeed.data.verify_in_place import summarize_in_place, verify_in_place
from trainspeed.errors import UsageError

RES = 8
SEQ = 6


def _config(**settings) -> LoaderConfig:
    return LoaderConfig(**{"batch_size": 2, "num_workers": 0, "drop_last": False, **settings})


def _npy(ids: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, ids)
    return buffer.getvalue()


def _write_tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as archive:
        for name, data in members:
            add_member(archive, name, data)
    return path


def _token_members(first: int, count: int, length: int = SEQ) -> list[tuple[str, bytes]]:
    return [(f"doc/{first + i:04d}.input_ids.npy", _npy(np.arange(first + i, first + i + length, dtype=np.uint16)))
            for i in range(count)]


def _image_members(first: int, count: int) -> list[tuple[str, bytes]]:
    members = []
    for i in range(first, first + count):
        members += [(f"{i:04d}.png", image_bytes(i, (10, 8), "PNG")), (f"{i:04d}.cls", f"{i % 3}\n".encode())]
    return members


def test_train_and_val_shards_by_name_are_the_splits(tmp_path: Path) -> None:
    folder = tmp_path / "tars"
    _write_tar(folder / "train-000.tar", _image_members(0, 5))
    _write_tar(folder / "train-001.tar", _image_members(5, 4))
    _write_tar(folder / "val-000.tar", _image_members(9, 3))
    before = snapshot(folder)
    train, val = open_images(folder, _config(), RES), open_images(folder, _config(split="val", shuffle=False), RES)
    assert (train.loader.num_samples, val.loader.num_samples, train.classes) == (9, 3, 3)
    assert torch.cat([batch["labels"] for batch in val.loader]).tolist() == [0, 1, 2]
    record = train.loader.data_record()
    assert (record["format"], record["files"], record["samples"]) == (WEBDATASET, 3, 9)
    summary = summarize_in_place(folder)
    assert (summary["kind"], summary["train_samples"], summary["val_samples"], summary["classes"]) == ("images", 9, 3, 3)
    assert snapshot(folder) == before


def test_one_tar_without_split_names_holds_out_five_percent_by_position(tmp_path: Path) -> None:
    path = _write_tar(tmp_path / "all.tar", _image_members(0, 24))
    train, val = open_images(path, _config(), RES), open_images(path, _config(split="val"), RES)
    assert (train.loader.num_samples, val.loader.num_samples) == (23, 1)
    assert verify_in_place(path).described == "1 tar shards, 24 images of 3 classes"


def test_val_shards_without_train_shards_are_one_line(tmp_path: Path) -> None:
    _write_tar(tmp_path / "tars" / "val-000.tar", _image_members(0, 2))
    with pytest.raises(UsageError, match=r"validation shards but no train\* shards; name the training shards train-"):
        open_images(tmp_path / "tars", _config(), RES)


@pytest.mark.parametrize(("members", "said"), [
    pytest.param([("0001.png", image_bytes(1, (8, 8), "PNG")), ("0001.cls", b"cat")],
                 r"member '0001.cls' holds b'cat', not a class number", id="class-not-a-number"),
    pytest.param([("0001.png", image_bytes(1, (8, 8), "PNG")), ("0001.cls", b"-2")],
                 r"member '0001.cls' holds b'-2', not a class number", id="negative-class"),
    pytest.param([("0001.png", image_bytes(1, (8, 8), "PNG")), ("0002.png", image_bytes(2, (8, 8), "PNG")),
                  ("0002.cls", b"1")],
                 r"0001: a member that is not a sample of a class \(KEY.cls\) \(1 such samples\)", id="image-without-class"),
    pytest.param([("0001.cls", b"1")], r"0001: a member that is not a sample of an image", id="class-without-image"),
    pytest.param([(".png", b"x")], r"member '.png' has no KEY.EXTENSION name", id="no-key"),
])
def test_a_member_that_is_not_part_of_a_sample_is_one_line(tmp_path: Path, members: list, said: str) -> None:
    path = _write_tar(tmp_path / "bad.tar", members)
    for attempt in (lambda: open_images(path, _config(), RES), lambda: verify_in_place(path)):
        with pytest.raises(UsageError, match=said) as raised:
            attempt()
        assert len(str(raised.value).splitlines()) == 1


def test_a_link_member_a_compressed_tar_and_a_damaged_tar_are_one_line(tmp_path: Path) -> None:
    linked = tmp_path / "link.tar"
    with tarfile.open(linked, "w") as archive:
        add_member(archive, "0001.png", image_bytes(1, (8, 8), "PNG"))
        info = tarfile.TarInfo("0001.cls")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(info)
    with pytest.raises(UsageError, match=r"member '0001.cls' is not a regular file \(a link or a device\), not a sample"):
        open_images(linked, _config(), RES)
    plain = _write_tar(tmp_path / "plain.tar", _image_members(0, 2)).read_bytes()
    (tmp_path / "packed.tar").write_bytes(gzip.compress(plain))
    with pytest.raises(UsageError, match=r"packed.tar: a compressed tar; samples are read at their offsets"):
        open_images(tmp_path / "packed.tar", _config(), RES)
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 40)
    with pytest.raises(UsageError, match=r"junk.tar: not a tar file"):
        open_images(tmp_path / "junk.tar", _config(), RES)
    (tmp_path / "cut.tar").write_bytes(plain[:700])  # the first header and part of its data, then nothing
    with pytest.raises(UsageError, match=r"cut.tar: ends early after 0 samples \(member '0000.png' is cut short"):
        open_images(tmp_path / "cut.tar", _config(), RES)


def test_a_folder_without_samples_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "notes.txt").write_text("-")
    with pytest.raises(UsageError, match=r"none: no .tar shards"):
        open_tar_shards(tmp_path / "none")
    with tarfile.open(tmp_path / "empty.tar", "w") as archive:
        info = tarfile.TarInfo("folder")
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
    with pytest.raises(UsageError, match=r"empty.tar: the tar shards hold no samples"):
        open_images(tmp_path / "empty.tar", _config(), RES)


def test_a_member_cut_short_after_opening_is_refused_in_one_line_or_skipped(tmp_path: Path) -> None:
    path = _write_tar(tmp_path / "train.tar", _image_members(0, 4))
    offsets = open_tar_shards(path).images.offsets
    loaders = {policy: open_images(path, _config(batch_size=4, shuffle=False, bad_samples=policy), RES).loader
               for policy in ("refuse", "skip")}
    with open(path, "r+b") as tar:  # cut inside the last image, after the shards were opened
        tar.truncate(int(offsets.max()) + 10)
    with pytest.raises(UsageError, match=r"train.tar:0003: cut short \(10 of \d+ bytes\); remove or replace it") as raised:
        list(loaders["refuse"])
    assert len(str(raised.value).splitlines()) == 1
    batch = next(iter(loaders["skip"]))
    assert batch["labels"].tolist() == [0, 1, 2, 0] and loaders["skip"].data_record()["skipped"] == 1


def test_token_windows_read_as_written_with_ids_checked_against_the_vocabulary(tmp_path: Path) -> None:
    folder = tmp_path / "tars"
    _write_tar(folder / "train-0.tar", _token_members(0, 5))
    _write_tar(folder / "train-1.tar", _token_members(100, 3))
    _write_tar(folder / "val-0.tar", _token_members(500, 2))
    train = open_tokens(folder, _config(batch_size=8, shuffle=False), SEQ)
    assert train.id_range == (0, 506) and train.loader.num_samples == 8  # every shard's ids, checked before training
    tokens = next(iter(train.loader))["tokens"]
    assert tokens[0].tolist() == list(range(SEQ)) and tokens[5].tolist() == list(range(100, 100 + SEQ))
    val = open_tokens(folder, _config(batch_size=8, split="val"), SEQ)
    assert val.loader.num_samples == 2 and val.loader.data_record()["details"] == {"window": SEQ}
    report = verify_in_place(folder, vocabulary=506)
    assert report.described == "3 tar shards, 10 token windows"
    assert len(report.problems) == 1 and "val-0.tar:doc/0501: ids from 501 to 506, outside 0..505" in report.problems[0]
    assert verify_in_place(folder).is_ok
    summary = summarize_in_place(folder)
    assert (summary["kind"], summary["samples"]) == ("token windows", 10) and "classes" not in summary


def test_token_windows_of_another_length_or_type_are_one_line(tmp_path: Path) -> None:
    short = _write_tar(tmp_path / "short.tar", _token_members(0, 2, length=SEQ - 1))
    with pytest.raises(UsageError, match=rf"a window of {SEQ - 1} ids; the model trains on windows of seq={SEQ}"):
        open_tokens(short, _config(), SEQ)
    floats = _write_tar(tmp_path / "floats.tar", [("0000.npy", _npy(np.zeros(SEQ, np.float32)))])
    with pytest.raises(UsageError, match=r"not a 1-D array of integer ids \(float32"):
        open_tokens(floats, _config(), SEQ)
    images = _write_tar(tmp_path / "images.tar", _image_members(0, 2))
    with pytest.raises(UsageError, match=r"a member that is not a sample of a token window \(KEY.npy\)"):
        open_tokens(images, _config(), SEQ)
    with pytest.raises(UsageError, match=r"--vocab: .*images.tar holds images, not token ids; drop --vocab"):
        verify_in_place(images, vocabulary=10)


def test_data_verify_names_a_corrupt_image_member(tmp_path: Path) -> None:
    members = _image_members(0, 3)
    members[2] = ("0001.png", members[2][1][:60])
    path = _write_tar(tmp_path / "shard.tar", members)
    report = verify_in_place(path)
    assert len(report.problems) == 1 and report.problems[0].startswith(f"{path}:0001: not a")


@pytest.mark.parametrize("kind", ["images", "tokens"])
def test_each_epoch_a_new_order_the_same_on_two_ranks_each_reading_its_share_and_resumed_exactly(
        tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "tars"
    if kind == "images":
        write_tar_shards(folder, shards=3, per_shard=8)
        key, open_loader = "images", lambda **c: open_images(folder, LoaderConfig(num_workers=0, seed=2, **c), RES).loader
    else:
        for shard in range(3):
            _write_tar(folder / f"{shard:03d}.tar", _token_members(10 * shard, 8))
        key, open_loader = "tokens", lambda **c: open_tokens(folder, LoaderConfig(num_workers=0, seed=2, **c), SEQ).loader
    orders = []
    for epoch in (0, 1):
        order = one_and_two_ranks(open_loader, key, epoch)
        whole = open_loader(batch_size=4)
        assert len(set(order)) == len(order) == whole.num_samples - whole.num_samples % 4
        orders.append(order)
    assert orders[0] != orders[1]
    interrupted = open_loader(batch_size=4)
    interrupted.set_epoch(1)
    batches = iter(interrupted)
    next(batches)
    resumed = open_loader(batch_size=4)
    resumed.load_state_dict(interrupted.state_dict())
    assert [batch[SAMPLE_ID_KEY].tolist() for batch in resumed] == [
        orders[1][start:start + 4] for start in range(4, len(orders[1]), 4)]


def _members(path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(path) as archive:
        return archive.getmembers()


def _end(path: Path) -> int:
    """Where the tar's end-of-archive marker starts: after the last member's data and padding."""
    last = _members(path)[-1]
    return last.offset_data + -(-last.size // 512) * 512


@pytest.mark.parametrize(("cut", "said"), [
    pytest.param(lambda tar: _members(tar)[6].offset, lambda tar, at: f"ends early after 3 samples (nothing after "
                 f"byte {at:,}, where its end-of-archive marker should be)", id="between-two-samples"),
    pytest.param(lambda tar: _end(tar) + 512, lambda tar, at: f"ends early after 6 samples (its end-of-archive marker "
                 f"at byte {at - 512:,} is cut short (512 of 1024 bytes))", id="inside-the-end-marker"),
    pytest.param(lambda tar: _members(tar)[4].offset_data + 10, lambda tar, at: f"ends early after 2 samples (member "
                 f"'0002.png' is cut short: 10 of its {_members(tar)[4].size:,} bytes)", id="inside-a-member"),
    pytest.param(lambda tar: _members(tar)[5].offset_data + 100, lambda tar, at: "ends early after 3 samples (cut in "
                 "the padding after member '0002.cls')", id="inside-a-members-padding"),
])
def test_a_tar_cut_short_ends_early_naming_the_samples_it_holds(tmp_path: Path, cut, said, cli_error) -> None:
    """A tar cut at a member boundary parses as a shorter tar: only its missing end-of-archive marker
    (two zero blocks) tells it was cut, and it is refused rather than read as fewer samples."""
    path = _write_tar(tmp_path / "shards" / "train-0.tar", _image_members(0, 6))
    assert len(open_tar_shards(path).keys) == 6
    at = cut(path)
    expected = f"{path}: {said(path, at)}; the file was cut (a copy or download stopped, or it is still being " \
               "written): copy it again"
    with open(path, "r+b") as tar:
        tar.truncate(at)
    for attempt in (lambda: open_images(path, _config(), RES), lambda: verify_in_place(path)):
        with pytest.raises(UsageError) as raised:
            attempt()
        assert str(raised.value) == expected
    assert cli_error("data", "verify", str(tmp_path / "shards")) == f"trainspeed: error: {expected}"


def test_a_member_declaring_more_than_a_sample_may_hold_is_one_line(tmp_path: Path) -> None:
    """Its header's size is refused before any of it is read (the file is sparse: no block written)."""
    from trainspeed.data.sample_files import MAX_SAMPLE_BYTES

    path = tmp_path / "huge.tar"
    info = tarfile.TarInfo("0000.png")
    info.size = MAX_SAMPLE_BYTES + 1
    header = info.tobuf(tarfile.USTAR_FORMAT)
    with open(path, "wb") as tar:
        tar.write(header)
        tar.truncate(len(header) + -(-info.size // 512) * 512 + 1024)  # the data, its padding, the end marker
    with pytest.raises(UsageError) as raised:
        open_images(path, _config(), RES)
    assert str(raised.value) == (f"{path}: member '0000.png' is {MAX_SAMPLE_BYTES + 1:,} bytes, more than the "
                                 f"{MAX_SAMPLE_BYTES:,} a sample may hold; shards hold one sample's image or window "
                                 "per member")


@pytest.mark.parametrize(("text", "said"), [
    pytest.param(b"1" * 30, "a class number past 2,147,483,647, the largest one a label holds", id="30-digits"),
    pytest.param(b"2147483648", "a class number past 2,147,483,647, the largest one a label holds", id="past-int32"),
    pytest.param(b"1_0", "not a class number (0, 1, 2 ...)", id="underscore"),
    pytest.param(b"", "not a class number (0, 1, 2 ...)", id="empty"),
])
def test_a_class_that_is_no_class_number_is_one_line_naming_the_tar_and_member(tmp_path: Path, text: bytes,
                                                                               said: str) -> None:
    members = _image_members(0, 3)
    members[3] = ("0001.cls", text)
    path = _write_tar(tmp_path / "bad.tar", members)
    for attempt in (lambda: open_images(path, _config(), RES), lambda: verify_in_place(path)):
        with pytest.raises(UsageError) as raised:
            attempt()
        shown = text[:20]
        assert str(raised.value) == f"{path}: member '0001.cls' holds {shown!r}{'...' if len(text) > 20 else ''}, {said}"
