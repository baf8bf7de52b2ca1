"""Generic verify on a test schema: a whole shard set end to end, and damage named by file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from trainspeed.data.base import LoaderConfig
from trainspeed.data.loader import ShardLoader
from trainspeed.data.shards import INDEX_NAME, ShardColumns, file_sha256, write_index
from trainspeed.data.verify import verify_shards
from point_shards import POINT_BATCHES, POINTS, SHARD_SIZES, write_points


def check_labels(path: Path, info: dict, columns: ShardColumns) -> list[str]:
    """The test schema's own rule: label is the point's first coordinate mod 251."""
    index = np.asarray(columns["point"][:, 0]).astype(np.int64)
    wrong = np.flatnonzero(np.asarray(columns["label"]) != index % 251)
    return [f"{path}: label does not match its point at row {int(wrong[0])}"] if len(wrong) else []


def test_a_shard_set_of_a_test_schema_writes_verifies_and_loads(tmp_path):
    folder = write_points(tmp_path / "points")
    checked = []

    def recording_check(path: Path, info: dict, columns: ShardColumns) -> list[str]:
        checked.append(path.name)
        return check_labels(path, info, columns)

    report = verify_shards(folder, POINTS, recording_check)
    assert report.is_ok, report.problems
    assert (report.shards, report.samples) == (len(SHARD_SIZES), sum(SHARD_SIZES))
    assert checked == [f"shard-{n:06d}.bin" for n in range(len(SHARD_SIZES))]

    loaded = []
    for split in ("train", "val"):
        loader = ShardLoader(folder, LoaderConfig(batch_size=64, split=split, drop_last=False, num_workers=1),
                             POINT_BATCHES)
        for batch in loader:
            index = batch["point"][:, 0].numpy().astype(np.int64)
            assert np.array_equal(batch["label"].numpy(), index % 251)
            assert np.array_equal(batch["point"][:, 2].numpy(), -index)
            loaded.append(index)
    assert np.array_equal(np.sort(np.concatenate(loaded)), np.arange(sum(SHARD_SIZES)))


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


def test_verify_names_a_flipped_byte_a_truncation_a_missing_and_an_overlong_shard(point_shards, tmp_path):
    folder = _copy(point_shards, tmp_path)
    files = sorted(folder.glob("shard-*.bin"))
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    with open(files[1], "r+b") as handle:
        handle.truncate(files[1].stat().st_size - 100)
    files[3].unlink()
    with open(files[4], "ab") as handle:
        handle.write(b"xx")
    report = verify_shards(folder, POINTS, check_labels)
    assert not report.is_ok
    assert report.problems == [
        f"{files[0]}: checksum mismatch (the file changed after it was written)",
        f"{files[1]}: {files[1].stat().st_size} bytes, expected {files[1].stat().st_size + 100} (truncated)",
        f"{files[3]}: missing",
        f"{files[4]}: {files[4].stat().st_size} bytes, expected {files[4].stat().st_size - 2} (extra bytes)",
    ]


def test_column_check_problems_are_reported_with_a_matching_checksum(tmp_path):
    folder = write_points(tmp_path / "points", sizes=(20,))
    shard = folder / "shard-000000.bin"
    raw = bytearray(shard.read_bytes())
    raw[POINTS.section_offsets(20)["label"] + 4] += 1  # the label of row 4
    shard.write_bytes(bytes(raw))
    # as if written so: the checksum matches the bad bytes, only the column check can tell
    sidecar = folder / "shard-000000.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "sha256": file_sha256(shard)}))
    write_index(folder, POINTS)
    assert verify_shards(folder, POINTS, check_labels).problems == [f"{shard}: label does not match its point at row 4"]
    assert verify_shards(folder, POINTS).is_ok  # without the hook only the bytes are checked


def test_an_index_whose_count_disagrees_with_its_shards_is_named(point_shards, tmp_path):
    folder = _copy(point_shards, tmp_path)
    index = json.loads((folder / INDEX_NAME).read_text())
    index["samples"] += 1
    (folder / INDEX_NAME).write_text(json.dumps(index))
    assert verify_shards(folder, POINTS).problems == [
        f"{folder / INDEX_NAME}: says {sum(SHARD_SIZES) + 1} samples, shards hold {sum(SHARD_SIZES)}"]
