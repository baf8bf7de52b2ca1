"""The file of one sample (an image in a folder, an image a dataset names by path) is read only as a
regular file of at most a sample's size: anything else is a bad sample naming the file, never a
wait for a FIFO's writer or a read of a device without end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainspeed.data.decode import BadSample
from trainspeed.data.sample_files import MAX_SAMPLE_BYTES, open_sample_file, read_sample_file


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(b"\x89PNG" + bytes(60))
    assert read_sample_file(path) == path.read_bytes()
    with open_sample_file(path) as handle:
        assert handle.read() == path.read_bytes()


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "missing", "too-large"])
def test_anything_but_a_regular_file_of_a_samples_size_is_a_bad_sample(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "a.png"
    said = {"fifo": "is a FIFO (named pipe), not a regular file", "device": "is a character device, not a regular file",
            "folder": "is a folder, not a regular file", "missing": "no such file",
            "too-large": f"is {MAX_SAMPLE_BYTES + 1:,} bytes, more than the {MAX_SAMPLE_BYTES:,} a sample may hold"}
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "too-large":
        with open(path, "wb") as sparse:  # no block written: the size alone is past the cap
            sparse.truncate(MAX_SAMPLE_BYTES + 1)
    for read in (read_sample_file, open_sample_file):
        with pytest.raises(BadSample) as bad:
            read(path, "dataset row 7")
        assert str(bad.value) == f"dataset row 7: {said[kind]}"
