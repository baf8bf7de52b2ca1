"""Reading result rows: what a row says it is, in one line naming what is wrong, and files that are
no regular files refused before they are read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.rows import Source, record_kind

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("record, said", [
    ({"kind": "mahjong-eval", "schema_version": "2"}, "a row whose schema_version is \"2\", not a whole number"),
    ({"kind": "mahjong-eval", "schema_version": True}, "a row whose schema_version is true, not a whole number"),
    ({"kind": 7, "schema_version": 2}, "a row whose kind is 7, not a name"),
    ({"kind": "bench"}, "a row without its schema_version"),
    ({"timestamp": "2026"}, "a row without a kind and schema_version"),
], ids=["version-a-string", "version-a-bool", "kind-a-number", "no-version", "neither"])
def test_a_row_that_says_its_kind_or_version_wrongly_is_told_what_is_wrong(record: dict, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        record_kind(record, Source("rows.jsonl", 3))
    assert str(refused.value).startswith("rows.jsonl:3: ") and said in str(refused.value)


def test_a_rows_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Reading a FIFO waits for a writer that never comes: a subprocess with a deadline."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    code = ("import sys\nfrom trainspeed.errors import UsageError\nfrom trainspeed.rows import read_records\n"
            f"try:\n    read_records({str(fifo)!r})\nexcept UsageError as error:\n    sys.exit(str(error))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr == f"{fifo}: is a FIFO (named pipe), not a regular file\n"
