"""An index is data from wherever its folder came from: wrong types are one line, a shard file
outside the folder is refused before anything opens it, and an index that disagrees with its shards
is refused by the loader (so by `train`) with the line `data verify` gives."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from child_commands import EXAMPLES, run_trainspeed
from point_shards import POINT_BATCHES

from trainspeed.cli import main
from trainspeed.data import open_dataset, write_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.data.loader import ShardLoader
from trainspeed.data.shards import INDEX_NAME
from trainspeed.errors import UsageError


def _edit_index(folder: Path, edit) -> None:
    index = json.loads((folder / INDEX_NAME).read_text())
    edit(index)
    (folder / INDEX_NAME).write_text(json.dumps(index))


@pytest.fixture
def points(point_shards: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "points"
    shutil.copytree(point_shards, folder)
    return folder


def _one_error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: ")
    return line


@pytest.mark.parametrize(("edit", "message"), [
    (lambda index: index.update(samples="4333"), "samples must be an integer, got '4333'"),
    (lambda index: index.update(shards={"file": "x"}), "shards must be a list"),
    (lambda index: index.update(columns=["point"]), "columns must be an object"),
    (lambda index: index["columns"]["point"].update(dtype="O"), "dtype 'O' is not a plain number or boolean type"),
    (lambda index: index["columns"]["point"].update(dtype="nonsense"), "'nonsense' is not a numpy dtype"),
    (lambda index: index["columns"]["point"].update(shape=[3, -1]), "is not a list of non-negative integers"),
    (lambda index: index["shards"][1].update(samples="1500"), "shards[1].samples must be a non-negative integer"),
    (lambda index: index["shards"][0].update(file=7), "shards[0].file must be a file name, got 7"),
    (lambda index: index["shards"].__setitem__(2, None), "shards[2] must be an object, got None"),
    (lambda index: index.clear(), "format must be a string, got None"),
])
def test_wrong_types_in_an_index_are_one_line_and_exit_2(points, capsys, edit, message):
    _edit_index(points, edit)
    for command in (["data", "verify", str(points)], ["data", "inspect", str(points)]):
        assert main(command) == 2
        line = _one_error_line(capsys)
        assert line.startswith(f"trainspeed: error: {points / INDEX_NAME}: ") and message in line, line


def test_an_index_that_is_not_an_object_or_too_deep_is_one_line(points, capsys):
    for text in ("[1, 2]", "[" * 100_000 + "]" * 100_000):
        (points / INDEX_NAME).write_text(text)
        assert main(["data", "verify", str(points)]) == 2
        _one_error_line(capsys)


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_a_shard_file_outside_the_folder_is_refused_before_it_is_read(points, tmp_path, capsys, where):
    """The outside file is a valid shard with the index's checksum: only where it lies is wrong."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(points / "shard-000001.bin", outside / "shard-000001.bin")
    name = {"absolute": str(outside / "shard-000001.bin"), "dotdot": "../elsewhere/shard-000001.bin",
            "symlink": "shard-000001.bin"}[where]
    if where == "symlink":
        (points / "shard-000001.bin").unlink()
        os.symlink(outside / "shard-000001.bin", points / "shard-000001.bin")
    _edit_index(points, lambda index: index["shards"][1].update(file=name))
    assert main(["data", "verify", str(points)]) == 2
    line = _one_error_line(capsys)
    assert f"shards[1].file {name!r}" in line and ("not a file of this folder" in line or "leads outside" in line)
    with pytest.raises(UsageError, match=r"shards\[1\]\.file"):
        ShardLoader(points, LoaderConfig(batch_size=8, num_workers=0), POINT_BATCHES)


def test_a_symlink_to_a_file_inside_the_folder_is_a_shard_like_any(points, capsys):
    (points / "stored").mkdir()
    (points / "shard-000001.bin").rename(points / "stored" / "shard-000001.bin")
    os.symlink(points / "stored" / "shard-000001.bin", points / "shard-000001.bin")
    assert main(["data", "verify", str(points)]) == 0, capsys.readouterr()


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda index: index.update(samples=index["samples"] + 5), "says 3338 samples, shards hold 3333"),
    (lambda index: index["shards"].append(dict(index["shards"][0])), "lists shard-000000.bin twice"),
    (lambda index: index["shards"][0].update(nbytes=5), "says shard-000000.bin has 5 bytes; 700 samples of this schema take"),
])
def test_the_loader_refuses_an_index_verify_refuses_with_verifys_line(points, capsys, edit, problem):
    _edit_index(points, edit)
    assert main(["data", "verify", str(points)]) == 1
    fails = [line.removeprefix("FAIL ") for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL ")]
    assert any(problem in line for line in fails), fails
    with pytest.raises(UsageError) as refused:
        ShardLoader(points, LoaderConfig(batch_size=8, num_workers=0), POINT_BATCHES)
    assert str(refused.value) in fails


def test_a_written_dataset_with_an_edited_total_is_refused_when_opened(tmp_path):
    folder = tmp_path / "data"
    write_dataset({"x": np.arange(100, dtype="<f4")}, folder)
    _edit_index(folder, lambda index: index.update(samples=90))
    with pytest.raises(UsageError, match="says 90 samples, shards hold 100"):
        open_dataset(folder, LoaderConfig(batch_size=8, num_workers=0))


@pytest.mark.e2e
def test_train_refuses_a_dataset_whose_index_disagrees_with_its_shards_before_any_step(tmp_path):
    """The user's report: `data verify` caught the edited index, `train` trained on it."""
    folder = tmp_path / "text"
    write_dataset({"tokens": np.zeros((400, 65), np.uint8), "document": np.arange(400) // 4}, folder,
                  split_by="document", val_fraction=0.1)
    _edit_index(folder, lambda index: index.update(samples=410))
    verify = run_trainspeed("data", "verify", str(folder), path=(EXAMPLES,))
    (problem,) = [line.removeprefix("FAIL ") for line in verify.stdout.splitlines() if line.startswith("FAIL ")]
    run = tmp_path / "run"
    train = run_trainspeed("train", "--workload", "char_lm_workload:CharLMWorkload", "--data", str(folder), "--steps", "2",
                           "--batch-size-per-device", "8", "--no-progress", "--out", str(run), path=(EXAMPLES,))
    assert train.returncode == 2 and train.stderr.strip() == f"trainspeed: error: {problem}"
    assert "says 410 samples, shards hold 400" in problem and not run.exists()
