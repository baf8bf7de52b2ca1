"""Datasets of a user's own arrays: `write_dataset` names its shards, decides and records the split,
and `open_dataset` reads every sample exactly once across the splits, keeping groups together."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.data import open_dataset, write_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.data.loader import OutputColumn
from trainspeed.data.shards import write_shard
from trainspeed.errors import UsageError
from point_shards import POINTS, point_columns

SAMPLES = 3000


def _columns() -> dict[str, np.ndarray]:
    index = np.arange(SAMPLES)
    return {"value": np.stack([index, -index], axis=1).astype("<i4"), "group": (index // 10).astype("<u4"),
            "flag": index % 2 == 0}


def _read(folder: Path, split: str, **kwargs) -> list[dict[str, torch.Tensor]]:
    config = LoaderConfig(batch_size=64, split=split, drop_last=False, num_workers=0)
    return list(open_dataset(folder, config, **kwargs))


def test_the_writer_names_its_shards_and_every_sample_is_read_once_with_its_group(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    index = write_dataset(_columns(), folder, split_by="group", val_fraction=0.2, samples_per_shard=700)
    assert sorted(p.name for p in folder.glob("*.bin")) == [f"shard-{n:06d}.bin" for n in range(5)]
    assert json.loads((folder / "index.json").read_text()) == index
    seen = {}
    for split in ("train", "val"):
        batches = _read(folder, split, outputs=("value", "group"))
        assert set(batches[0]) == {"value", "group", "meta_sample_id"}
        seen[split] = torch.cat([batch["value"][:, 0] for batch in batches]).numpy()
        groups = torch.cat([batch["group"] for batch in batches]).numpy()
        assert np.array_equal(groups, seen[split] // 10)
        assert len(seen[split]) == index["split"][f"{split}_samples"]
    assert np.array_equal(np.sort(np.concatenate(list(seen.values()))), np.arange(SAMPLES))
    assert not set(seen["train"] // 10) & set(seen["val"] // 10)  # no group on both sides
    assert 0.1 < len(seen["val"]) / SAMPLES < 0.3


def test_without_split_by_each_sample_is_held_out_on_its_own_and_outputs_may_widen(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    index = write_dataset(_columns(), folder, val_fraction=0.1)
    assert index["split"]["by"] is None and len(index["shards"]) == 1
    val = _read(folder, "val", outputs=(OutputColumn("value", torch.int64), "flag"))
    values = torch.cat([batch["value"] for batch in val])
    assert values.dtype == torch.int64 and val[0]["flag"].dtype == torch.bool
    assert torch.equal(torch.cat([batch["flag"] for batch in val]), values[:, 0] % 2 == 0)
    held_out = values[:, 0].numpy()
    assert len(np.unique(held_out // 10)) > len(held_out) / 3  # single samples, not whole groups


@pytest.mark.parametrize(("columns", "kwargs", "message"), [
    ({}, {}, "no columns given"),
    ({"a": np.zeros(3), "b": np.zeros(4)}, {}, r"different lengths \(a 3, b 4\)"),
    ({"a": np.array([{"x": 1}], dtype=object)}, {}, "dtype object; store booleans or numbers only"),
    ({"a": np.float32(1.0)}, {}, "is a scalar"),
    ({"meta_sample_id": np.zeros(3)}, {}, "other than meta_sample_id"),
    ({"a": np.zeros(3)}, {"split_by": "b"}, "split_by 'b' is not a column"),
    ({"a": np.zeros(3)}, {"split_by": "a"}, "it must be one integer per sample"),
    ({"a": np.zeros(3)}, {"val_fraction": 1.0}, "must be at least 0 and below 1"),
    ({"a": np.zeros(3)}, {"val_fraction": 0.0125}, "per-mille steps"),
    ({"a": np.zeros(0)}, {}, "hold no samples"),
])
def test_bad_columns_are_one_usage_error_before_anything_is_written(tmp_path, columns, kwargs, message):
    with pytest.raises(UsageError, match=message):
        write_dataset(columns, tmp_path / "data", **kwargs)
    assert not (tmp_path / "data").exists()


def test_a_folder_that_holds_anything_is_never_written_into(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    write_dataset(_columns(), folder)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    with pytest.raises(UsageError, match="holds a dataset of `trainspeed data from-arrays` made with other settings"):
        write_dataset({"other": np.ones(5)}, folder)
    with pytest.raises(UsageError, match="already holds this dataset, finished"):
        write_dataset(_columns(), folder)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_a_shard_name_that_the_index_would_not_gather_is_refused(tmp_path: Path) -> None:
    """write_index gathers `shard-*` sidecars only; a shard of another name indexed 0 samples silently."""
    with pytest.raises(ValueError, match="shard names start with 'shard-'"):
        write_shard(tmp_path, "part-0", POINTS, point_columns(0, 5))
    assert list(tmp_path.iterdir()) == []
