"""Hugging Face datasets read where they lie: a save_to_disk folder (Dataset or DatasetDict) or
parquet files, images + labels or token ids, its validation split or 5% held out, and every form
of bad input refused in one line. In the test's process, on a few rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from in_place_data import CLASSES, image_bytes, snapshot, write_hf_images

from trainspeed.data.base import LoaderConfig
from trainspeed.data.in_place import open_images, open_tokens
from trainspeed.data.order import SAMPLE_ID_KEY
from trainspeed.data.sources import HF_DATASET, detect_format
from trainspeed.data.verify_in_place import summarize_in_place, verify_in_place
from trainspeed.errors import UsageError

datasets = pytest.importorskip("datasets")
datasets.disable_progress_bars()
RES = 8


@pytest.fixture(autouse=True)
def library_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The library converts parquet files into its cache: one under the test's folder."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def _config(**settings) -> LoaderConfig:
    return LoaderConfig(**{"batch_size": 2, "num_workers": 0, "drop_last": False, **settings})


def _image_rows(count: int, offset: int = 0) -> dict:
    return {"image": [{"bytes": image_bytes(offset + i, (14, 10), "PNG"), "path": None} for i in range(count)],
            "label": [(offset + i) % 3 for i in range(count)]}


def _image_dataset(count: int, offset: int = 0):
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=list(CLASSES))})
    return datasets.Dataset.from_dict(_image_rows(count, offset), features=features)


def _token_dataset(lengths: list[int], column: str = "input_ids", start: int = 0):
    rows, first = [], start
    for length in lengths:
        rows.append(list(range(first, first + length)))
        first += length
    return datasets.Dataset.from_dict({column: rows})


def _samples(loader) -> int:
    return sum(len(batch[SAMPLE_ID_KEY]) for batch in loader)


def test_parquet_files_and_a_save_to_disk_folder_are_one_format_read_in_place(tmp_path: Path) -> None:
    saved = tmp_path / "saved"
    _image_dataset(24).save_to_disk(str(saved))
    parquet = tmp_path / "parquet"
    parquet.mkdir()
    _image_dataset(24).to_parquet(str(parquet / "train-00000.parquet"))
    _image_dataset(4, offset=24).to_parquet(str(parquet / "validation-00000.parquet"))
    before = snapshot(tmp_path / "parquet"), snapshot(saved)
    for path in (saved, parquet, parquet / "train-00000.parquet"):
        assert detect_format(path) == HF_DATASET
    whole = open_images(saved, _config(), RES)
    one_file = open_images(parquet / "train-00000.parquet", _config(), RES)
    assert whole.classes == one_file.classes == 3
    assert whole.loader.num_samples == one_file.loader.num_samples == 23  # row 20 of 24 held out by its position's hash
    assert open_images(saved, _config(split="val"), RES).loader.num_samples == 1
    split = open_images(parquet, _config(), RES)
    val = open_images(parquet, _config(split="val"), RES)
    assert (split.loader.num_samples, val.loader.num_samples) == (24, 4)  # the files named validation*
    assert _samples(val.loader) == 4
    assert val.loader.data_record()["files"] == 2
    in_order = [open_images(path, _config(shuffle=False), RES).loader for path in (saved, parquet / "train-00000.parquet")]
    for first, second in zip(*in_order, strict=True):
        assert torch.equal(first["labels"], second["labels"])
    assert (snapshot(tmp_path / "parquet"), snapshot(saved)) == before


def test_parquet_files_without_a_training_file_are_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "parquet"
    folder.mkdir()
    _image_dataset(3).to_parquet(str(folder / "val-00000.parquet"))
    with pytest.raises(UsageError, match=r"no training parquet files \(only val-00000.parquet\); name them train"):
        open_images(folder, _config(), RES)


def test_a_dataset_dict_reads_its_train_and_validation_splits(tmp_path: Path) -> None:
    path = tmp_path / "dict"
    datasets.DatasetDict({"train": _image_dataset(6), "validation": _image_dataset(3, offset=6)}).save_to_disk(str(path))
    train, val = open_images(path, _config(), RES), open_images(path, _config(split="val"), RES)
    assert (train.loader.num_samples, val.loader.num_samples) == (6, 3)
    labels = torch.cat([batch["labels"] for batch in open_images(path, _config(split="val", shuffle=False),
                                                                 RES).loader])
    assert labels.tolist() == [0, 1, 2]
    summary = summarize_in_place(path)
    assert (summary["train_rows"], summary["val_rows"], summary["split"]) == (6, 3, "its validation split")


@pytest.mark.parametrize(("splits", "said"), [
    pytest.param({"test_only": 3}, r"a DatasetDict without a 'train' split \(it has test_only\)", id="no-train"),
    pytest.param({"train": 3, "val": "other-columns"}, r"the validation split's columns \(image, label, extra\) differ",
                 id="val-columns-differ"),
])
def test_a_dataset_dict_without_a_usable_train_split_is_one_line(tmp_path: Path, splits: dict, said: str) -> None:
    parts = {}
    for name, rows in splits.items():
        if rows == "other-columns":
            parts[name] = _image_dataset(2).add_column("extra", [0, 1])
        else:
            parts[name] = _image_dataset(rows)
    datasets.DatasetDict(parts).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(UsageError, match=said) as raised:
        open_images(tmp_path / "dict", _config(), RES)
    assert len(str(raised.value).splitlines()) == 1


def test_a_folder_the_library_cannot_read_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "state.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"broken: the datasets library cannot read it \(") as raised:
        open_images(broken, _config(), RES)
    assert len(str(raised.value).splitlines()) == 1


def test_without_the_datasets_library_the_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_hf_images(tmp_path / "hf", count=3)
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # what an environment without it imports
    with pytest.raises(UsageError, match=r"needs the datasets library: pip install 'trainspeed\[datasets\]'"):
        open_images(path, _config(), RES)


def test_images_by_column_name_with_integer_labels_count_their_classes(tmp_path: Path) -> None:
    rows = _image_rows(6)
    datasets.Dataset.from_dict({"img": rows["image"], "labels": [0, 4, 1, 4, 2, 0]}).save_to_disk(str(tmp_path / "p"))
    opened = open_images(tmp_path / "p", _config(shuffle=False), RES)
    assert opened.classes == 5  # the largest label + 1: no ClassLabel names them
    assert opened.loader.data_record()["details"] == {"columns": ["img", "labels"], "classes": 5}
    assert opened.loader.num_samples + open_images(tmp_path / "p", _config(split="val"), RES).loader.num_samples == 6
    assert all(batch["images"].shape[1:] == (3, RES, RES) for batch in opened.loader)


@pytest.mark.parametrize(("labels", "said"), [
    pytest.param([0.0, 1.5], r"column 'label' holds double; labels are whole numbers from 0", id="floats"),
    pytest.param([0, -1], r"column 'label' holds -1; labels count from 0", id="negative"),
])
def test_labels_that_are_not_classes_are_one_line(tmp_path: Path, labels: list, said: str) -> None:
    kind = datasets.Value("float64" if isinstance(labels[0], float) else "int64")
    features = datasets.Features({"image": datasets.Image(), "label": kind})
    datasets.Dataset.from_dict({"image": _image_rows(2)["image"], "label": labels},
                               features=features).save_to_disk(str(tmp_path / "p"))
    with pytest.raises(UsageError, match=said):
        open_images(tmp_path / "p", _config(), RES)


def test_a_row_without_an_image_or_naming_a_missing_file_is_a_bad_sample(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    photo = tmp_path / "photo.png"
    photo.write_bytes(image_bytes(1, (12, 12), "PNG"))
    images = [{"bytes": None, "path": str(photo)}, None, {"bytes": None, "path": str(tmp_path / "gone.png")}]
    table = pa.table({"image": pa.array(images, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                      "label": pa.array([0, 1, 1], pa.int64())})
    pq.write_table(table, tmp_path / "rows.parquet")  # written by another tool: paths, not embedded bytes
    config = _config(batch_size=3, shuffle=False, bad_samples="skip")
    opened = open_images(tmp_path / "rows.parquet", config, RES)  # the 5% split of 3 rows holds none
    batch = next(iter(opened.loader))  # row 1 passes over row 2 to row 0, row 2 to row 0: three skips
    assert opened.loader.data_record()["skipped"] == 3 and batch["labels"].tolist() == [0, 0, 0]
    report = verify_in_place(tmp_path / "rows.parquet")
    assert [problem.split(": ", 1)[1] for problem in report.problems] == [
        "holds no image", "no such file"]
    with pytest.raises(UsageError, match=r"rows.parquet row 1: holds no image; remove or replace it"):
        list(open_images(tmp_path / "rows.parquet", _config(batch_size=3, shuffle=False), RES).loader)


def test_data_verify_names_a_corrupt_image_and_refuses_a_vocabulary_for_images(tmp_path: Path) -> None:
    rows = _image_rows(3)
    rows["image"][2] = {"bytes": rows["image"][2]["bytes"][:120], "path": None}
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=list(CLASSES))})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "p"))
    report = verify_in_place(tmp_path / "p")
    assert report.described == "Hugging Face dataset, 3 images of 3 classes"
    assert len(report.problems) == 1 and "(train) row 2: not a readable image" in report.problems[0]
    with pytest.raises(UsageError, match=r"--vocab: .* holds images, not token ids; drop --vocab"):
        verify_in_place(tmp_path / "p", vocabulary=100)


def test_token_ids_are_cut_into_windows_within_each_arrow_piece(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    _token_dataset([30, 7, 50]).save_to_disk(str(path))
    train = open_tokens(path, _config(batch_size=4, shuffle=False), 9)
    val = open_tokens(path, _config(batch_size=4, split="val"), 9)
    total = (87 - 1) // 8  # windows of 9 ids sharing one with the next, from one Arrow piece
    assert train.loader.num_samples + val.loader.num_samples == total and val.loader.num_samples == 1
    assert train.id_range == (0, 86)
    first = next(iter(train.loader))["tokens"]
    assert first[0].tolist() == list(range(9)) and first[1, 0] == 8
    last = next(iter(val.loader))["tokens"]
    assert last[0].tolist() == list(range(8 * (total - 1), 8 * (total - 1) + 9))
    record = train.loader.data_record()
    assert record["format"] == HF_DATASET and record["details"] == {"columns": ["input_ids"], "window": 9}
    summary = summarize_in_place(path)
    assert summary["train_rows"] == 3 and summary["val_rows"] is None


def test_a_token_dataset_with_a_validation_split_reads_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    datasets.DatasetDict({"train": _token_dataset([40], column="tokens"),
                          "test": _token_dataset([20], column="tokens", start=100)}).save_to_disk(str(path))
    val = open_tokens(path, _config(batch_size=8, split="val", shuffle=False), 5)
    assert val.loader.num_samples == (20 - 1) // 4 and val.id_range == (100, 119)
    assert next(iter(val.loader))["tokens"][0].tolist() == [100, 101, 102, 103, 104]
    assert open_tokens(path, _config(batch_size=8), 5).loader.num_samples == (40 - 1) // 4
    report = verify_in_place(path, vocabulary=110)
    assert report.described == "Hugging Face dataset, 60 token ids in column 'tokens'"
    assert report.problems == [f"{path} (val): column 'tokens' holds ids from 100 to 119, outside 0..109 (--vocab)"]
    assert verify_in_place(path).is_ok


@pytest.mark.parametrize(("rows", "said"), [
    pytest.param({"input_ids": [[0.5, 1.5]]}, r"column 'input_ids' holds list<item: double>; token ids are sequences "
                 "of integers", id="float-ids"),
    pytest.param({"input_ids": [3, 4]}, r"column 'input_ids' holds int\d+; token ids are sequences", id="not-lists"),
    pytest.param({"input_ids": [[1, None, 3]]}, r"column 'input_ids' holds missing ids \(nulls\)", id="nulls"),
    pytest.param({"text": ["a b"]}, r"no token id column \(input_ids or tokens\); its columns are text", id="no-column"),
])
def test_token_ids_of_the_wrong_type_are_one_line(tmp_path: Path, rows: dict, said: str) -> None:
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "t"))
    with pytest.raises(UsageError, match=said) as raised:
        open_tokens(tmp_path / "t", _config(), 4)
    assert len(str(raised.value).splitlines()) == 1


def test_an_image_dataset_on_one_and_two_ranks_reads_each_sample_once_per_epoch_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "p"
    _image_dataset(24).save_to_disk(str(path))
    config = LoaderConfig(batch_size=2, num_workers=0, seed=7)
    orders = []
    for epoch in (0, 1):
        loader = open_images(path, config, RES).loader
        loader.set_epoch(epoch)
        ids = np.concatenate([batch[SAMPLE_ID_KEY].numpy() for batch in loader])
        assert len(set(ids.tolist())) == len(ids) == 22 and set(ids.tolist()) <= set(range(23))  # each once
        orders.append(ids.tolist())
    assert orders[0] != orders[1]  # a new permutation each epoch
    whole = open_images(path, config, RES).loader
    expected = list(whole)
    first = open_images(path, config, RES).loader
    batches = iter(first)
    next(batches), next(batches)
    resumed = open_images(path, config, RES).loader
    resumed.load_state_dict(first.state_dict())
    for got, want in zip(resumed, expected[2:], strict=True):
        assert all(torch.equal(got[key], want[key]) for key in want)


def _parquet_images(path: Path, labels: list, label: "datasets.ClassLabel | datasets.Value") -> Path:
    """Images and `labels` written by another tool (pyarrow, with the features' schema), so nothing
    checked the labels on the way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = datasets.Features({"image": datasets.Image(), "label": label})
    images = [{"bytes": image_bytes(i, (10, 8), "PNG"), "path": None} for i in range(len(labels))]
    pq.write_table(pa.table({"image": images, "label": labels}, schema=features.arrow_schema), path)
    return path


@pytest.mark.parametrize(("labels", "label", "said"), [
    pytest.param([0, 1, 2, None, 1, None], datasets.Value("int64"), "row 3: column 'label' holds a null, no class (2 "
                 "such rows); give every row a class number, or drop the rows without one", id="null"),
    pytest.param([0, 1, 2, 1, 7], datasets.ClassLabel(names=list(CLASSES)), "row 4: column 'label' holds 7; the "
                 "ClassLabel names 3 classes (0..2)", id="past-the-class-label"),
    pytest.param([0, 1, 2**40], datasets.Value("int64"), "row 2: column 'label' holds 1099511627776; past "
                 "2,147,483,647, the largest class number a label holds", id="past-int32"),
])
def test_a_label_that_is_no_class_is_one_line_naming_the_file_and_row(tmp_path: Path, labels: list, label,
                                                                      said: str) -> None:
    path = _parquet_images(tmp_path / "train-0.parquet", labels, label)
    for attempt in (lambda: open_images(path, _config(), RES), lambda: verify_in_place(path)):
        with pytest.raises(UsageError) as raised:
            attempt()
        assert str(raised.value) == f"{path} (train) {said}"


def test_a_fifo_among_a_datasets_files_is_one_line_before_the_library_opens_any(tmp_path: Path) -> None:
    """The library would wait on it for a writer for ever (or, in a parquet folder, leave it out)."""
    import os

    folder = tmp_path / "parquet"
    folder.mkdir()
    _image_dataset(6).to_parquet(str(folder / "train-00000.parquet"))
    os.mkfifo(folder / "train-00001.parquet")
    with pytest.raises(UsageError) as raised:
        open_images(folder, _config(), RES)
    assert str(raised.value) == (f"{folder / 'train-00001.parquet'}: is a FIFO (named pipe), not a regular file; a "
                                 "dataset's folder holds its files only")
