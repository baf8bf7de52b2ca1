"""A user's files opened only as regular files: each refusal is one line naming the file and what it
is instead, so a missing file, a path through a file, a FIFO or a file the kernel cannot read never
becomes a traceback or a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused, open_regular, read_regular, regular_file_problem


def test_a_missing_file_is_refused_naming_what_the_caller_calls_it(tmp_path: Path) -> None:
    with pytest.raises(FileRefused) as refused:
        read_regular(tmp_path / "gone.json", "--config gone.json")
    assert str(refused.value) == "--config gone.json: no such file" and refused.value.reason == "no such file"
    assert isinstance(refused.value, UsageError)  # the CLI turns it into its one error line


def test_a_path_through_a_regular_file_says_why_it_cannot_be_opened(tmp_path: Path) -> None:
    """`file/inside` is neither missing nor readable: the kernel's reason is named, not raised."""
    (tmp_path / "file").write_text("x")
    path = tmp_path / "file" / "inside"
    with pytest.raises(FileRefused, match=r"inside: cannot be read \(Not a directory\)$"):
        open_regular(path)


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
def test_a_regular_file_whose_read_fails_is_one_line_not_an_os_error() -> None:
    """/proc/self/mem is a regular file that the kernel refuses to read at offset 0 (EIO): the
    read error of a damaged disk, on any Linux machine."""
    with pytest.raises(FileRefused) as refused:
        read_regular("/proc/self/mem", "the checkpoint")
    assert str(refused.value) == "the checkpoint: cannot be read (Input/output error)"


def test_regular_file_problem_names_what_a_path_is_before_a_library_opens_it(tmp_path: Path) -> None:
    regular = tmp_path / "log.jsonl"
    regular.write_text("{}\n")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert regular_file_problem(regular) is None
    assert regular_file_problem(tmp_path / "missing.jsonl") == "no such file"
    assert regular_file_problem(regular / "inside") == "cannot be read (Not a directory)"
    assert regular_file_problem(fifo) == "is a FIFO (named pipe), not a regular file"
    assert regular_file_problem(tmp_path) == "is a folder, not a regular file"
