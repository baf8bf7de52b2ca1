"""Files written whole: a file that must be new is never written over one that appeared while the
command ran, and lines are appended only to a regular file."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from trainspeed.atomic import FileAppeared, append_line, check_writable_directory, create_exclusive_text, move_to_new
from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused


def test_a_new_file_is_written_whole(tmp_path: Path) -> None:
    create_exclusive_text(tmp_path / "result.json", "{}\n", "--out result.json")
    assert [path.name for path in tmp_path.iterdir()] == ["result.json"]
    assert (tmp_path / "result.json").read_text() == "{}\n"


def test_a_file_that_appeared_meanwhile_is_left_as_it_is(tmp_path: Path) -> None:
    """The caller found the path free; a file made there since (the user's, or a second command's)
    is refused in one line, and neither it nor a temporary file is left changed or behind."""
    out = tmp_path / "result.json"
    out.write_text("the user's\n")
    with pytest.raises(FileAppeared) as refused:
        create_exclusive_text(out, "{}\n", f"--out {out}")
    assert isinstance(refused.value, UsageError)
    assert str(refused.value).startswith(f"--out {out}: a file appeared there while this command ran")
    assert out.read_text() == "the user's\n" and [path.name for path in tmp_path.iterdir()] == ["result.json"]


def test_a_link_that_appeared_meanwhile_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("kept\n")
    (tmp_path / "result.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileAppeared):
        create_exclusive_text(tmp_path / "result.json", "{}\n", "--out result.json")
    assert (tmp_path / "elsewhere").read_text() == "kept\n"


@pytest.mark.parametrize("hard_links", [True, False], ids=["hard-links", "no-hard-links"])
def test_a_move_never_replaces_what_is_at_the_target(tmp_path: Path, hard_links: bool,
                                                     request: pytest.FixtureRequest) -> None:
    if not hard_links:
        request.getfixturevalue("no_hard_links")
    (tmp_path / "a").write_text("a\n")
    (tmp_path / "b").write_text("b\n")
    assert not move_to_new(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a").read_text() == "a\n" and (tmp_path / "b").read_text() == "b\n"
    assert move_to_new(tmp_path / "a", tmp_path / "c")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b", "c"] and (tmp_path / "c").read_text() == "a\n"


@pytest.fixture
def no_hard_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a file system without hard links (FAT, some network and FUSE mounts), which this
    machine has none of: `link` fails with EPERM."""

    def link(*args, **kwargs) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", link)


def test_without_hard_links_a_new_file_is_still_written_whole_and_never_over_one(tmp_path: Path,
                                                                               no_hard_links: None) -> None:
    create_exclusive_text(tmp_path / "result.json", "{}\n", "--out result.json")
    assert (tmp_path / "result.json").read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == ["result.json"]
    with pytest.raises(FileAppeared):
        create_exclusive_text(tmp_path / "result.json", "[]\n", "--out result.json")
    assert (tmp_path / "result.json").read_text() == "{}\n" and [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_fifo_put_where_rows_go_is_refused_not_written_to(tmp_path: Path) -> None:
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused, match=r"rows.jsonl: is a FIFO \(named pipe\), not a regular file"):
        append_line(fifo, "{}")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_device_where_rows_go_is_refused_not_written_to() -> None:
    with pytest.raises(FileRefused, match="/dev/full: is a character device, not a regular file"):
        append_line("/dev/full", "{}")


def test_a_folder_probed_from_many_threads_at_once_is_writable_to_each(tmp_path: Path) -> None:
    """Commands run from threads of one process probe one folder at once: no probe is another's."""
    start = threading.Barrier(8)
    refused: list[UsageError] = []

    def probe() -> None:
        start.wait()
        for _ in range(200):
            try:
                check_writable_directory(tmp_path, "--out results.jsonl")
            except UsageError as error:
                refused.append(error)

    threads = [threading.Thread(target=probe) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert refused == [] and list(tmp_path.iterdir()) == []
