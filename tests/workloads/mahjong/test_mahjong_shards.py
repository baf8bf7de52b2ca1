"""Shard format: index matches data, float16 error is as stated, verify names damaged files."""

import json
import shutil

import numpy as np
import pytest

from trainspeed.data.shards import ShardInfo, open_shard, read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.data.shards import (FORMAT_VERSION, MAHJONG_SCHEMA, write_mahjong_index,
                                                      write_mahjong_shard)
from trainspeed.workloads.mahjong.data.verify import summarize_mahjong_shards, verify_mahjong_shards
from trainspeed.workloads.mahjong.encoding import FEATURE_SHAPE, EncodedSamples


def _copy(folder, tmp_path):
    target = tmp_path / "shards"
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("mjai"))
    return target


def _samples(n: int, game_id: int = 3) -> EncodedSamples:
    rng = np.random.default_rng(0)
    mask = rng.random((n, 82)) < 0.3
    action = np.array([rng.choice(np.flatnonzero(row)) for row in mask | (np.arange(82) == 81)])
    mask[np.arange(n), action] = True
    return EncodedSamples(
        features=(rng.integers(0, 71, (n, *FEATURE_SHAPE)) / 70).astype(np.float32), mask=mask, action=action,
        game_id=np.full(n, game_id), seat=rng.integers(0, 4, n), turn=np.arange(n))


def test_written_columns_read_back(tmp_path):
    samples = _samples(37)
    info = write_mahjong_shard(tmp_path, "shard-000000", samples)
    write_mahjong_index(tmp_path)
    columns = open_shard(tmp_path, info.to_json(), MAHJONG_SCHEMA)
    assert np.array_equal(np.asarray(columns["mask"]).astype(bool), samples.mask)
    for name in ("action", "game_id", "seat", "turn"):
        assert np.array_equal(np.asarray(columns[name]), getattr(samples, name))
    error = np.abs(np.asarray(columns["features"]).astype(np.float32) - samples.features).max()
    assert error == pytest.approx(info.stats["feature_max_abs_error"])
    assert 0 < error <= 2.0**-11  # values in [0, 1]: float16 rounds to within half an ulp of 2^-10


def test_the_on_disk_format_is_that_of_existing_shard_sets(tmp_path):
    """Shard folders of this version must keep reading: same name, version, columns and layout."""
    assert (MAHJONG_SCHEMA.format_name, MAHJONG_SCHEMA.format_version) == ("trainspeed-mahjong-shards", 2)
    assert list(MAHJONG_SCHEMA.columns_json().items()) == [
        ("features", {"dtype": "<f2", "shape": [86, 34]}), ("mask", {"dtype": "|u1", "shape": [82]}),
        ("action", {"dtype": "|u1", "shape": []}), ("game_id", {"dtype": "<u4", "shape": []}),
        ("seat", {"dtype": "|u1", "shape": []}), ("turn", {"dtype": "<u2", "shape": []})]
    assert MAHJONG_SCHEMA.section_offsets(3) == {"features": 0, "mask": 17600, "action": 17856, "game_id": 17920,
                                                  "seat": 17984, "turn": 18048, "end": 18112}
    info = write_mahjong_shard(tmp_path, "shard-000000", _samples(3))
    assert set(info.to_json()) == {"file", "samples", "games", "first_game_id", "last_game_id", "nbytes", "sha256",
                                   "feature_max_abs_error", "ctime_ns"}
    # Sidecars written before the change stamp existed read as they are (their shards get hashed).
    old = {key: value for key, value in info.to_json().items() if key != "ctime_ns"}
    assert ShardInfo.from_json(old).ctime_ns is None and ShardInfo.from_json(old).stats == info.stats


def test_index_counts_match_the_data(mahjong_shards):
    index = read_index(mahjong_shards, MAHJONG_SCHEMA)
    total = 0
    for info in index["shards"]:
        columns = open_shard(mahjong_shards, info, MAHJONG_SCHEMA)
        game_ids = np.asarray(columns["game_id"])
        assert len(game_ids) == info["samples"]
        assert len(np.unique(game_ids)) == info["games"]
        total += len(game_ids)
    assert total == index["samples"] > 0
    assert index["bytes_per_sample"] == MAHJONG_SCHEMA.bytes_per_sample() == 5938
    summary = summarize_mahjong_shards(mahjong_shards)
    assert summary.samples == total and summary.format_version == FORMAT_VERSION


def test_every_recorded_action_is_legal_under_its_mask(mahjong_shards):
    for info in read_index(mahjong_shards, MAHJONG_SCHEMA)["shards"]:
        columns = open_shard(mahjong_shards, info, MAHJONG_SCHEMA)
        action = np.asarray(columns["action"]).astype(np.int64)
        assert np.asarray(columns["mask"])[np.arange(len(action)), action].all()


def test_verify_passes_a_good_folder(mahjong_shards):
    report = verify_mahjong_shards(mahjong_shards)
    assert report.is_ok, report.problems


def test_verify_names_a_flipped_byte_and_a_truncated_shard(mahjong_shards, tmp_path):
    folder = _copy(mahjong_shards, tmp_path)
    files = sorted(folder.glob("shard-*.bin"))
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    with open(files[1], "r+b") as handle:
        handle.truncate(files[1].stat().st_size - 100)
    report = verify_mahjong_shards(folder)
    assert not report.is_ok
    assert any(str(files[0]) in p and "checksum" in p for p in report.problems)
    assert any(str(files[1]) in p and "truncated" in p for p in report.problems)


def test_verify_finds_an_illegal_action_even_with_a_matching_checksum(tmp_path):
    samples = _samples(10)
    samples.mask[4, samples.action[4]] = False  # written as is: the writer does not judge legality
    write_mahjong_shard(tmp_path, "shard-000000", samples)
    write_mahjong_index(tmp_path)
    report = verify_mahjong_shards(tmp_path)
    assert any("not legal" in p and "row 4" in p for p in report.problems)


def test_verify_finds_features_that_are_not_finite(tmp_path):
    samples = _samples(10)
    samples.features[7, 3, 5] = np.nan
    write_mahjong_shard(tmp_path, "shard-000000", samples)
    write_mahjong_index(tmp_path)
    assert any("NaN" in p and "shard-000000.bin" in p for p in verify_mahjong_shards(tmp_path).problems)


def test_wrong_format_version_is_a_clear_error(mahjong_shards, tmp_path):
    folder = _copy(mahjong_shards, tmp_path)
    index = json.loads((folder / "index.json").read_text())
    index["format_version"] = FORMAT_VERSION + 1
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(UsageError, match="format version"):
        verify_mahjong_shards(folder)


def test_a_failed_write_leaves_no_shard(tmp_path):
    samples = _samples(5)
    samples.turn[0] = 2**16  # does not fit the uint16 column
    with pytest.raises(ValueError):
        write_mahjong_shard(tmp_path, "shard-000000", samples)
    assert list(tmp_path.iterdir()) == []


def test_shards_of_the_engine_planes_only_are_refused_with_how_to_remake_them(mahjong_shards, tmp_path):
    """Version 1 shards (the engine's 74 planes, before the tile-fact planes) must not be read as
    if their features were the model's 86."""
    old = tmp_path / "old"
    shutil.copytree(mahjong_shards, old)
    index = json.loads((old / "index.json").read_text())
    index["format_version"] = 1
    (old / "index.json").write_text(json.dumps(index))
    with pytest.raises(UsageError, match="format version 1; this trainspeed reads version 2 .re-make the shards"):
        read_index(old, MAHJONG_SCHEMA)
