"""Damaged or foreign data never trains: `trainspeed train` refuses it at its first read, with the
line `trainspeed data verify` gives, instead of training to NaN or crashing mid-run."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_child
from train_runs import run_train, train_env

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


def _verify_lines(folder: Path) -> list[str]:
    result = run_child([sys.executable, "-m", "trainspeed", "data", "verify", str(folder)],
                            env=train_env(), timeout=120)
    return [line.removeprefix("FAIL ") for line in result.stdout.splitlines() if line.startswith("FAIL ")]


def _refused(folder: Path, *extra: str) -> str:
    result = run_train("--data", str(folder), *RUN, "--out", str(folder.parent / "run"), *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "nan" not in result.stdout.lower()
    return line


def test_flipped_bytes_of_the_same_size_are_refused_with_verifys_line(shards: Path) -> None:
    path, info = _first_shard(shards)
    with open(path, "r+b") as handle:  # features of the first samples: NaN-making bytes
        handle.write(b"\xff\x7f" * 64)
    (problem,) = _verify_lines(shards)
    assert _refused(shards) == f"trainspeed: error: {problem}"
    assert problem.endswith("checksum mismatch (the file changed after it was written)")


def test_an_action_out_of_range_with_a_valid_checksum_is_refused(shards: Path) -> None:
    def out_of_range(data: bytearray, offsets: dict, info: dict) -> None:
        data[offsets["action"] + 5] = 200

    _rewrite_with_checksum(shards, out_of_range)
    line = _refused(shards)
    assert line.startswith("trainspeed: error: ") and line.endswith("action id out of range at row 5")
    assert any(problem.endswith("action id out of range at row 5") for problem in _verify_lines(shards))


def test_illegal_actions_with_a_valid_checksum_are_refused(shards: Path) -> None:
    def illegal(data: bytearray, offsets: dict, info: dict) -> None:
        mask = np.frombuffer(bytes(data[offsets["mask"]: offsets["mask"] + 82]), np.uint8)
        data[offsets["action"]] = int(np.flatnonzero(mask == 0)[0])

    _rewrite_with_checksum(shards, illegal)
    assert _refused(shards).endswith("1 actions not legal under their mask (first at row 0)")


@pytest.mark.parametrize("damage", ["deleted", "not a file"])
def test_a_missing_or_unreadable_shard_is_one_line(shards: Path, damage: str) -> None:
    path, _ = _first_shard(shards)
    path.unlink()
    if damage == "not a file":
        path.mkdir()
    line = _refused(shards)
    assert line == f"trainspeed: error: {path}: {'missing' if damage == 'deleted' else 'not a regular file'}"


@pytest.mark.slow
def test_two_ranks_refuse_damaged_data_with_one_line_too(shards: Path) -> None:
    path, _ = _first_shard(shards)
    with open(path, "r+b") as handle:
        handle.write(b"\xff\x7f" * 64)
    line = _refused(shards, "--nproc", "2")  # the launcher reads a first batch, or a rank meets the shard
    assert line.startswith("trainspeed: error: ") and "checksum mismatch" in line
