"""Numbers too long for Python in the files a command reads: an integer of 5,000 digits (Python
refuses to convert more than 4,300) and one of 400 (no float holds it). Every reader reads JSON by
one policy (`trainspeed.user_json`), so each command answers with one line naming the file (and
the line), exit code 2, before it measures or trains anything; a flag's number too long is one
line too."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from trainspeed.cli import main

DIGITS = {"5000-digits": "1" * 5000, "400-digits": "1" * 400}
TINY_TRAIN = ["train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "2", "--threads", "1",
              "--no-progress"]


def _rows_file(folder: Path, digits: str) -> Path:
    """A bench row whose batch is the number, after a line that is fine."""
    path = folder / "rows.jsonl"
    path.write_text('{"kind": "bench", "schema_version": 1, "note": "first"}\n'
                    f'{{"kind": "bench", "schema_version": 1, "batch_size": {digits}}}\n')
    return path


def _said(digits: str) -> str:
    return f"the number 11111111111111111111... ({len(digits)} digits) is larger than any number a float holds"


@pytest.mark.parametrize("digits", DIGITS.values(), ids=DIGITS.keys())
@pytest.mark.parametrize("command", ["report", "plot", "plan", "bench --out", "train --bench-jsonl"])
def test_a_rows_file_with_a_number_too_long_is_one_line_naming_its_line(tmp_path: Path, cli_error, command: str,
                                                                       digits: str) -> None:
    rows = _rows_file(tmp_path, digits)
    argv = {"report": ["report", str(rows), "--out", str(tmp_path / "report.html")],
            "plot": ["plot", str(rows)],
            "plan": ["plan", str(rows)],
            "bench --out": ["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32",
                            "--batch-sizes", "8", "--no-progress", "--no-plot", "--out", str(rows)],
            "train --bench-jsonl": [*TINY_TRAIN, "--bench-jsonl", str(rows), "--out", str(tmp_path / "run")]}[command]
    line = cli_error(*argv)
    assert re.search(rf"{re.escape(str(rows))}(:|: line )2: {re.escape(_said(digits))}", line), line
    assert not (tmp_path / "run").exists() and not (tmp_path / "report.html").exists()


@pytest.fixture
def shard_set(tmp_path: Path) -> Path:
    """A shard set of a user's arrays, as `data from-arrays` writes it."""
    arrays = tmp_path / "arrays.npz"
    np.savez(arrays, x=np.zeros((64, 4), np.float32), y=np.zeros(64, np.int64))
    assert main(["data", "from-arrays", str(arrays), "--out", str(tmp_path / "data")]) == 0
    return tmp_path / "data"


@pytest.mark.parametrize("digits", DIGITS.values(), ids=DIGITS.keys())
@pytest.mark.parametrize("command", ["data verify", "train"])
def test_a_datasets_index_with_a_number_too_long_is_one_line_naming_it(shard_set: Path, cli_error, command: str,
                                                                      digits: str) -> None:
    index = shard_set / "index.json"
    index.write_text(re.sub(r'"samples": \d+', f'"samples": {digits}', index.read_text(), count=1))
    argv = (["data", "verify", str(shard_set)] if command == "data verify" else
            ["train", "--workload", "mahjong", "--size", "tiny", "--data", str(shard_set), "--steps", "1",
             "--out", str(shard_set.parent / "run")])
    assert cli_error(*argv) == f"trainspeed: error: {index}: {_said(digits)} (about 1.8e308); no file this tool " \
                               "writes holds one (the file was edited or written by another program)"


def test_a_whole_number_flag_too_long_for_python_is_one_line_saying_so(cli_error) -> None:
    """5,000 digits are more than Python converts to an int: "not a whole number" was wrong."""
    line = cli_error(*TINY_TRAIN, "--steps", "1" * 5000)
    assert line.startswith("trainspeed: error: argument --steps: '11111111111111111111'... (5000 digits) is larger "
                           "than any whole number a flag takes") and len(line) < 300
