"""Generic shards: columns round trip, the byte layout, the index, and one-line errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from trainspeed.data.shards import (INDEX_NAME, SECTION_ALIGN, ShardSchema, file_sha256, open_shard, read_index,
                                    write_index, write_shard)
from trainspeed.errors import UsageError
from point_shards import POINTS, SHARD_SIZES, point_columns, write_points


def test_written_columns_read_back_exactly(point_shards):
    index = read_index(point_shards, POINTS)
    start = 0
    for info, size in zip(index["shards"], SHARD_SIZES, strict=True):
        columns = open_shard(point_shards, info, POINTS)
        for name, expected in point_columns(start, size).items():
            assert np.array_equal(np.asarray(columns[name]), expected), name
            assert columns[name].dtype == POINTS.columns[name][0]
        start += size
    assert index["samples"] == start == sum(SHARD_SIZES)


def test_index_records_the_schema_the_stats_totals_and_extra(point_shards):
    index = read_index(point_shards, POINTS)
    assert index["format"] == "trainspeed-test-points" and index["format_version"] == 2
    assert index["columns"] == {"point": {"dtype": "<f4", "shape": [3]}, "label": {"dtype": "|u1", "shape": []},
                                "flag": {"dtype": "|u1", "shape": []}, "group": {"dtype": "<u4", "shape": []}}
    assert index["bytes_per_sample"] == POINTS.bytes_per_sample() == 12 + 1 + 1 + 4
    assert index["groups"] == sum(s["groups"] for s in index["shards"])
    assert index["source"] == {"made_by": "tests"}
    first = index["shards"][0]
    assert first["groups"] == 100 and first["samples"] == 700
    assert first["sha256"] == file_sha256(point_shards / first["file"])
    sidecar = json.loads((point_shards / first["file"]).with_suffix(".json").read_text())
    assert sidecar == first


def test_sections_are_aligned_and_the_file_is_only_the_columns(tmp_path):
    columns = point_columns(0, 5)
    info = write_shard(tmp_path, "shard-000000", POINTS, columns)
    offsets = POINTS.section_offsets(5)
    assert [offsets[name] for name in POINTS.columns] == [0, 64, 128, 192]
    assert all(offset % SECTION_ALIGN == 0 for offset in offsets.values())
    raw = (tmp_path / info.file).read_bytes()
    assert len(raw) == offsets["end"] == info.nbytes == 256
    assert raw[offsets["group"]:offsets["group"] + 20] == columns["group"].tobytes()


def test_an_empty_shard_is_valid(tmp_path):
    info = write_shard(tmp_path, "shard-000000", POINTS, point_columns(0, 0))
    assert info.samples == 0 and info.nbytes == 0
    assert np.asarray(open_shard(tmp_path, info.to_json(), POINTS)["point"]).shape == (0, 3)


def test_columns_that_do_not_match_the_schema_are_refused_and_nothing_is_written(tmp_path):
    good = point_columns(0, 4)
    wrong_dtype = {**good, "label": good["label"].astype(np.int64)}
    wrong_shape = {**good, "point": good["point"][:, :2]}
    missing = {name: array for name, array in good.items() if name != "flag"}
    ragged = {**good, "group": good["group"][:3]}
    for columns, message in [(wrong_dtype, "'label' is <i8"), (wrong_shape, r"'point' is <f4 \(2,\)"),
                             (missing, "do not match"), (ragged, "different lengths")]:
        with pytest.raises(ValueError, match=message):
            write_shard(tmp_path, "shard-000000", POINTS, columns)
    assert list(tmp_path.iterdir()) == []


def test_schema_accepts_dtype_names_and_lists():
    schema = ShardSchema("x", 1, {"a": (np.float16, [2, 2]), "b": ("u1", ())})
    assert schema.columns == {"a": (np.dtype("<f2"), (2, 2)), "b": (np.dtype("u1"), ())}


def _edited_index(folder, tmp_path, **changes):
    target = tmp_path / "edited"
    shutil.copytree(folder, target)
    index = json.loads((target / INDEX_NAME).read_text())
    index.update(changes)
    (target / INDEX_NAME).write_text(json.dumps(index))
    return target


@pytest.mark.parametrize("problem,expected", [
    ("no folder", r"missing: no such folder \(make them with write_points\)"),
    ("no index", r"index\.json: missing; this folder holds no finished shard set"),
    ("bad json", r"index\.json: not valid JSON"),
    ("other format", r"index\.json: format 'someone-else', expected 'trainspeed-test-points'"),
    ("other version", r"index\.json: format version 3; this trainspeed reads version 2"),
    ("other columns", r"index\.json: columns \['point', 'label'\] differ"),
])
def test_read_index_problems_are_one_line_usage_errors(point_shards, tmp_path, problem, expected):
    folder = {
        "no folder": lambda: tmp_path / "missing",
        "no index": lambda: tmp_path,
        "bad json": lambda: (tmp_path / INDEX_NAME).write_text("{not json") and tmp_path,
        "other format": lambda: _edited_index(point_shards, tmp_path, format="someone-else"),
        "other version": lambda: _edited_index(point_shards, tmp_path, format_version=3),
        "other columns": lambda: _edited_index(point_shards, tmp_path, columns={
            name: column for name, column in POINTS.columns_json().items() if name in ("point", "label")}),
    }[problem]()
    with pytest.raises(UsageError, match=expected) as error:
        read_index(folder, POINTS)
    assert "\n" not in str(error.value)


def test_open_shard_names_a_truncated_file(tmp_path):
    folder = write_points(tmp_path / "points", sizes=(50,))
    info = read_index(folder, POINTS)["shards"][0]
    with open(folder / info["file"], "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(UsageError, match=r"shard-000000\.bin: 100 bytes, expected .* \(truncated\)"):
        open_shard(folder, info, POINTS)


def test_write_index_gathers_only_finished_shards(tmp_path):
    folder = write_points(tmp_path / "points", sizes=(10, 20))
    (folder / "shard-000001.json").unlink()  # as if killed between the .bin and its sidecar
    index = write_index(folder, POINTS)
    assert [s["file"] for s in index["shards"]] == ["shard-000000.bin"] and index["samples"] == 10
