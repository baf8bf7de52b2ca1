"""Damaged or foreign data never trains: `trainspeed train` refuses it at its first read, with the
line `trainspeed data verify` gives, instead of training to NaN or crashing mid-run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from train_runs import TINY_RUN, run_train

from trainspeed.cli import main
from trainspeed.data.shards import file_sha256
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

pytestmark = pytest.mark.e2e

RUN = ["--batch-size-per-device", "512", "--epochs", "1", "--num-workers", "1"]  # reads every sample


@pytest.fixture
def shards(tmp_path: Path, data_args: list[str]) -> Path:
    folder = tmp_path / "shards"
    shutil.copytree(data_args[1], folder)
    return folder


def _first_shard(folder: Path) -> tuple[Path, dict]:
    index = json.loads((folder / "index.json").read_text())
    info = index["shards"][0]
    return folder / info["file"], info


def _rewrite_with_checksum(folder: Path, change) -> None:
    """Change the first shard's bytes and record the new checksum, as a foreign tool might."""
    path, info = _first_shard(folder)
    data = bytearray(path.read_bytes())
    change(data, MAHJONG_SCHEMA.section_offsets(int(info["samples"])), info)
    path.write_bytes(bytes(data))
    digest = file_sha256(path)
    for document_path in (folder / "index.json", path.with_suffix(".json")):
        document = json.loads(document_path.read_text())
        for entry in document.get("shards", [document]):
            if entry["file"] == path.name:
                entry["sha256"] = digest
        document_path.write_text(json.dumps(document))


def _verify_lines(folder: Path, capfd: pytest.CaptureFixture) -> list[str]:
    """`trainspeed data verify FOLDER`'s problems, run in this process (its process is not what is tested)."""
    capfd.readouterr()
    main(["data", "verify", str(folder)])
    printed = capfd.readouterr().out
    return [line.removeprefix("FAIL ") for line in printed.splitlines() if line.startswith("FAIL ")]


def _refused_line(code: int, out: str, err: str) -> str:
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert "nan" not in out.lower()
    return line


def _refused(folder: Path, capfd: pytest.CaptureFixture, *extra: str) -> str:
    """`trainspeed train` of one rank on FOLDER, run in this process (a crash would fail the test as
    it fails the command): the one line it refused the data with."""
    capfd.readouterr()
    threads = torch.get_num_threads()  # --threads sets this process's
    try:
        code = main(["train", *TINY_RUN, "--data", str(folder), *RUN, "--out", str(folder.parent / "run"), *extra])
    finally:
        torch.set_num_threads(threads)
    captured = capfd.readouterr()
    return _refused_line(code, captured.out, captured.err)


def _refused_by_ranks(folder: Path, *extra: str) -> str:
    """The same as a child process of several ranks, as the launcher starts them."""
    result = run_train("--data", str(folder), *RUN, "--out", str(folder.parent / "run"), *extra)
    return _refused_line(result.returncode, result.stdout, result.stderr)


def test_flipped_bytes_of_the_same_size_are_refused_with_verifys_line(shards: Path, capfd) -> None:
    path, info = _first_shard(shards)
    with open(path, "r+b") as handle:  # features of the first samples: NaN-making bytes
        handle.write(b"\xff\x7f" * 64)
    (problem,) = _verify_lines(shards, capfd)
    assert _refused(shards, capfd) == f"trainspeed: error: {problem}"
    assert problem.endswith("checksum mismatch (the file changed after it was written)")


def test_an_action_out_of_range_with_a_valid_checksum_is_refused(shards: Path, capfd) -> None:
    def out_of_range(data: bytearray, offsets: dict, info: dict) -> None:
        data[offsets["action"] + 5] = 200

    _rewrite_with_checksum(shards, out_of_range)
    line = _refused(shards, capfd)
    assert line.startswith("trainspeed: error: ") and line.endswith("action id out of range at row 5")
    assert any(problem.endswith("action id out of range at row 5") for problem in _verify_lines(shards, capfd))


def test_illegal_actions_with_a_valid_checksum_are_refused(shards: Path, capfd) -> None:
    def illegal(data: bytearray, offsets: dict, info: dict) -> None:
        mask = np.frombuffer(bytes(data[offsets["mask"]: offsets["mask"] + 82]), np.uint8)
        data[offsets["action"]] = int(np.flatnonzero(mask == 0)[0])

    _rewrite_with_checksum(shards, illegal)
    assert _refused(shards, capfd).endswith("1 actions not legal under their mask (first at row 0)")


@pytest.mark.parametrize("damage", ["deleted", "not a file"])
def test_a_missing_or_unreadable_shard_is_one_line(shards: Path, damage: str, capfd) -> None:
    path, _ = _first_shard(shards)
    path.unlink()
    if damage == "not a file":
        path.mkdir()
    line = _refused(shards, capfd)
    assert line == f"trainspeed: error: {path}: {'missing' if damage == 'deleted' else 'not a regular file'}"


@pytest.mark.slow
def test_two_ranks_refuse_damaged_data_with_one_line_too(shards: Path) -> None:
    path, _ = _first_shard(shards)
    with open(path, "r+b") as handle:
        handle.write(b"\xff\x7f" * 64)
    line = _refused_by_ranks(shards, "--nproc", "2")  # the launcher reads a first batch, or a rank meets the shard
    assert line.startswith("trainspeed: error: ") and "checksum mismatch" in line
