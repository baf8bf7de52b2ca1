"""Token files and token folders read where they lie: their splits, and the files refused in one
line before anything trains."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from in_place_data import write_tokens

from trainspeed.data.base import LoaderConfig
from trainspeed.data.in_place import open_tokens
from trainspeed.data.tokens import TokenReader, open_token_data, verify_tokens, window_count
from trainspeed.errors import UsageError


def _text(tmp_path: Path) -> Path:
    folder = tmp_path / "text"
    folder.mkdir()
    return folder


def test_a_val_file_is_the_validation_split_whole(tmp_path: Path) -> None:
    folder = _text(tmp_path)
    write_tokens(folder / "train.bin", 400)
    np.arange(100, 181, dtype=np.uint16).tofile(folder / "val.bin")
    train = open_tokens(folder, LoaderConfig(batch_size=4, drop_last=False), 9)
    val = open_tokens(folder, LoaderConfig(batch_size=4, split="val", shuffle=False, drop_last=False), 9)
    assert train.loader.num_samples == window_count(400, 9) and val.loader.num_samples == window_count(81, 9) == 10
    first = next(iter(val.loader))["tokens"]
    assert first[0].tolist() == list(range(100, 109)) and first[1, 0] == 108


@pytest.mark.parametrize(("names", "said"), [
    pytest.param(("train.bin", "train.npy"), "text: both train.bin and train.npy; keep one train file",
                 id="two-train-files"),
    pytest.param(("train.bin", "val.uint32.bin"), "val.uint32.bin: ids of uint32, the training file's are uint16; "
                 "write both with one type", id="val-of-another-type"),
])
def test_a_token_folder_whose_files_disagree_is_one_line(tmp_path: Path, names: tuple[str, ...], said: str) -> None:
    folder = _text(tmp_path)
    for name in names:
        ids = np.arange(50, dtype=np.uint32 if "uint32" in name else np.uint16)
        np.save(folder / name, ids) if name.endswith(".npy") else ids.tofile(folder / name)
    with pytest.raises(UsageError) as raised:
        open_tokens(folder, LoaderConfig(batch_size=1), 4)
    assert said in str(raised.value) and len(str(raised.value).splitlines()) == 1


def test_a_folder_without_a_train_file_is_one_line(tmp_path: Path) -> None:
    folder = _text(tmp_path)
    write_tokens(folder / "val.bin", 50)
    with pytest.raises(UsageError, match=r"text: no train.bin or train.npy; a token folder holds train.bin \(and val.bin\)"):
        open_token_data(folder)


def test_an_npy_cut_short_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(100, dtype=np.uint16))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(UsageError, match=r"ids.npy: holds 190 bytes of ids, its header declares 200 \(100 x 2\); the "
                                         "file is cut short or damaged"):
        open_tokens(path, LoaderConfig(batch_size=1), 4)


def test_windows_of_fewer_than_two_ids_are_refused(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "ids.bin", 100)
    with pytest.raises(UsageError, match=r"windows of 1 ids: a window needs at least 2 \(an input and its next id\)"):
        open_tokens(path, LoaderConfig(batch_size=1), 1)


def test_an_empty_val_file_verifies_with_no_ids_and_no_windows(tmp_path: Path) -> None:
    folder = _text(tmp_path)
    write_tokens(folder / "train.bin", 100)
    (folder / "val.bin").write_bytes(b"")
    data, problems = verify_tokens(folder, None)
    assert problems == [] and data.val.count == 0 and len(data.val.ids()) == 0
    assert open_tokens(folder, LoaderConfig(batch_size=1, split="val"), 4).loader.num_samples == 0


def test_a_token_reader_sent_to_a_worker_reads_the_same_windows(tmp_path: Path) -> None:
    data = open_token_data(write_tokens(tmp_path / "ids.bin", 300))
    reader = TokenReader(data, "train", 8)
    ids = np.array([0, 5, 17])
    here = {"tokens": np.empty((3, 8), np.int32)}
    reader.read_batch(ids, 0, here)  # the parent's open file is not sent along
    there = {"tokens": np.empty((3, 8), np.int32)}
    pickle.loads(pickle.dumps(reader)).read_batch(ids, 0, there)
    assert np.array_equal(here["tokens"], there["tokens"])


def test_a_loader_resumed_at_the_end_of_its_epoch_reads_nothing_until_the_next(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "ids.bin", 200)
    config = LoaderConfig(batch_size=4, num_workers=0, seed=1)
    first = open_tokens(path, config, 8).loader
    whole = list(first)
    resumed = open_tokens(path, config, 8).loader
    resumed.load_state_dict(first.state_dict())
    assert whole and list(resumed) == []
    resumed.set_epoch(1)
    assert len(list(resumed)) == len(whole)


def _cut_while_read(path: Path, size: int) -> str:
    return (f"{path}: now {size:,} bytes, 4,000 when it was opened: the file was cut or rewritten while it was read; "
            "put it back as it was (a run resumes from its last checkpoint with --resume)")


def test_a_token_file_cut_while_a_loader_reads_it_is_one_line_not_a_bus_error(tmp_path: Path) -> None:
    """Read through a memory map, the cut file's missing pages killed the reading process with SIGBUS
    (a worker: torch's message blaming shared memory; the training process: no message at all). The
    reading is a worker's here, so that a return of the memory map fails this test, not pytest."""
    path = write_tokens(tmp_path / "ids.bin", 2_000)
    loader = open_tokens(path, LoaderConfig(batch_size=8, num_workers=1, seed=3), 16).loader
    batches = iter(loader)
    next(batches)
    with open(path, "r+b") as cut:
        cut.truncate(100)
    with pytest.raises(UsageError) as raised:
        list(batches)
    assert str(raised.value) == _cut_while_read(path, 100)


def test_a_token_file_whose_size_changed_since_it_was_opened_is_one_line_before_it_is_read(tmp_path: Path) -> None:
    path = write_tokens(tmp_path / "ids.bin", 2_000)
    data = open_token_data(path)
    with open(path, "r+b") as cut:
        cut.truncate(1_000)
    with pytest.raises(UsageError) as raised:
        list(data.train.chunks())
    assert str(raised.value) == _cut_while_read(path, 1_000)
