"""Token ids are checked where they enter a dataset: `data from-arrays` (and `write_dataset`) refuses
ids that int32 cannot hold, negative ids and ids past a given vocabulary, naming the array, the
value and where it is; the index records the ids' range; `data verify` reports ids out of range."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainspeed.cli import main
from trainspeed.data import write_dataset
from trainspeed.data.dataset import recorded_range
from trainspeed.errors import UsageError

WIDE_ID = 2**62
"""An int64 id that narrowed to int32 wraps to 0: trained as token 0 if nothing checked it."""


def _windows(samples: int = 64, width: int = 16) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 1000, (samples, width), dtype=np.int64)


def _with(value: int, row: int = 40, position: int = 3) -> np.ndarray:
    windows = _windows()
    windows[row, position] = value
    return windows


def unchecked_token_set(folder: Path, tokens: np.ndarray) -> Path:
    """A dataset as one written before token ids were checked (or by another tool): its ids as given,
    its index without their range. Written under another name, then renamed in the index (the
    shards' bytes, and so their checksums, stay as written)."""
    write_dataset({"ids": tokens}, folder, val_fraction=0.25)
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text())
    index["columns"] = {"tokens": index["columns"].pop("ids")}
    index.pop("ranges", None)
    index_path.write_text(json.dumps(index))
    return folder


@pytest.mark.parametrize("source", ["npz", "npy folder"])
@pytest.mark.parametrize(("value", "said"), [
    (WIDE_ID, f"token id {WIDE_ID} at row 40, position 3 does not fit int32, which token ids are trained as"),
    (-7, "token id -7 at row 40, position 3 is negative (ids count from 0)"),
])
def test_from_arrays_refuses_ids_int32_cannot_hold_and_negative_ids_naming_the_array_value_and_place(
        tmp_path: Path, cli_error, source: str, value: int, said: str) -> None:
    if source == "npz":
        path, where = tmp_path / "arrays.npz", f"{tmp_path / 'arrays.npz'}: member 'tokens.npy'"
        np.savez(path, tokens=_with(value), document=np.arange(64) // 8)
    else:
        path = tmp_path / "arrays"
        path.mkdir()
        np.save(path / "tokens.npy", _with(value))
        where = str(path / "tokens.npy")
    out = tmp_path / "out"
    line = cli_error("data", "from-arrays", str(path), "--out", str(out), "--samples-per-shard", "16")
    assert line.startswith(f"trainspeed: error: {where}: {said}"), line
    assert not out.exists() or list(out.iterdir()) == []  # the shards written before the bad one are gone


def test_a_given_vocabulary_bounds_the_ids_and_is_recorded_with_their_range(tmp_path: Path, cli_error, capsys) -> None:
    np.savez(tmp_path / "past.npz", tokens=_with(5000))
    line = cli_error("data", "from-arrays", str(tmp_path / "past.npz"), "--out", str(tmp_path / "refused"), "--vocab", "1024")
    assert "member 'tokens.npy': token id 5000 at row 40, position 3 is past the vocabulary (1,024 ids: 0..1023)" in line
    np.savez(tmp_path / "inside.npz", tokens=_with(1023))
    assert main(["data", "from-arrays", str(tmp_path / "inside.npz"), "--out", str(tmp_path / "data"), "--vocab", "1024"]) == 0
    capsys.readouterr()
    assert main(["data", "inspect", str(tmp_path / "data"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["vocabulary"] == 1024 and summary["ranges"]["tokens"] == {"min": 0, "max": 1023}
    assert recorded_range(tmp_path / "data", "tokens") == (0, 1023)


def test_write_dataset_refuses_token_ids_that_are_no_whole_numbers_and_a_vocabulary_without_them(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"column 'tokens': the 'tokens' column holds token ids, and this one is float32"):
        write_dataset({"tokens": np.zeros((4, 2), np.float32)}, tmp_path / "floats")
    with pytest.raises(UsageError, match=r"vocabulary 10: it bounds the token ids of a 'tokens' column, and there is none"):
        write_dataset({"ids": np.zeros((4, 2), np.int32)}, tmp_path / "none", vocabulary=10)
    assert not (tmp_path / "floats").exists() and not (tmp_path / "none").exists()


@pytest.mark.parametrize(("value", "vocab", "said"), [
    (-7, None, "token id -7 at row {row}, position 3 is negative (ids count from 0)"),
    (WIDE_ID, None, f"token id {WIDE_ID} at row {{row}}, position 3 does not fit int32, which token ids are trained "
                    "as (ids run up to 2,147,483,647)"),
    (5000, "1024", "token id 5000 at row {row}, position 3 is past --vocab (1,024 ids: 0..1023)"),
])
def test_verify_reports_token_ids_out_of_range(tmp_path: Path, capsys, value: int, vocab: str | None, said: str) -> None:
    tokens = _with(value)
    tokens[50, 3] = value
    folder = unchecked_token_set(tmp_path / "data", tokens)
    assert main(["data", "verify", str(folder), *(["--vocab", vocab] if vocab else [])]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"FAIL {folder / 'shard-000000.bin'}: {said.format(row=40)} (1 more in this shard)",
                     f"{folder}: 1 problems"]


def test_verify_checks_ids_against_the_recorded_vocabulary_and_values_against_the_recorded_ranges(
        tmp_path: Path, capsys, cli_error) -> None:
    folder = tmp_path / "data"
    write_dataset({"tokens": _with(999), "document": np.arange(64) // 8}, folder, vocabulary=1000)
    assert main(["data", "verify", str(folder)]) == 0
    assert main(["data", "verify", str(folder), "--vocab", "999"]) == 1
    assert "is past --vocab (999 ids: 0..998)" in capsys.readouterr().out
    index = json.loads((folder / "index.json").read_text())
    index["vocabulary"], index["ranges"]["document"]["max"] = 10, 5  # an index that does not describe its data
    (folder / "index.json").write_text(json.dumps(index))
    assert main(["data", "verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "token id " in out and "is past the vocabulary its index records (10 ids: 0..9)" in out
    assert "column 'document' holds 6 at row 48, outside the 0..5 its index records" in out
    assert "'0' must be at least 1" in cli_error("data", "verify", str(folder), "--vocab", "0")
    write_dataset({"ids": _windows()}, tmp_path / "no-tokens")
    line = cli_error("data", "verify", str(tmp_path / "no-tokens"), "--vocab", "10")
    assert "--vocab 10: it bounds the token ids of a 'tokens' column" in line


def test_a_ranges_record_of_another_form_is_one_line(tmp_path: Path, cli_error) -> None:
    folder = tmp_path / "data"
    write_dataset({"tokens": _windows()}, folder)
    index = json.loads((folder / "index.json").read_text())
    index["ranges"] = {"tokens": {"min": 0, "max": "many"}}
    (folder / "index.json").write_text(json.dumps(index))
    line = cli_error("data", "verify", str(folder))
    assert line == (f"trainspeed: error: {folder / 'index.json'}: ranges.tokens must be {{\"min\": n, \"max\": n}} of one "
                    "of its columns, got {'min': 0, 'max': 'many'}")
    with pytest.raises(UsageError, match="ranges.tokens must be"):
        recorded_range(folder, "tokens")
