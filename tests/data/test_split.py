"""The train/val split a shard set's index records: read where it is well formed, None where there
is none, and refused in one line otherwise (the torch loader and the trainer of exported steps read
it through the same function)."""

from pathlib import Path

import pytest

from trainspeed.data.split import recorded_split
from trainspeed.errors import UsageError

COLUMNS = {"x": {}, "game": {}}


@pytest.mark.parametrize("split", [{"by": None, "val_per_mille": 0}, {"by": "game", "val_per_mille": 100},
                                   {"by": None, "val_per_mille": 1000}])
def test_a_well_formed_split_is_read_as_recorded(split):
    assert recorded_split(Path("data"), {"columns": COLUMNS, "split": split}) == split


def test_an_index_without_a_split_records_none():
    assert recorded_split(Path("data"), {"columns": COLUMNS}) is None


@pytest.mark.parametrize("split", [{"by": "missing", "val_per_mille": 100}, {"by": None, "val_per_mille": 1001},
                                   {"by": None, "val_per_mille": True}, {"by": None, "val_per_mille": 0.5},
                                   {"by": None}, [None, 100], "game"])
def test_a_split_of_another_form_is_refused_in_one_line_naming_the_index(split):
    with pytest.raises(UsageError) as refused:
        recorded_split(Path("data"), {"columns": COLUMNS, "split": split})
    assert str(refused.value).startswith("data/index.json: split must be ") and "\n" not in str(refused.value)
