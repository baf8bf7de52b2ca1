"""`trainspeed data inspect | verify` of data read where it lies, through the command line in this
process, and the `--data` paths that are no format at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from in_place_data import corrupt, write_image_folder, write_tar_shards, write_tokens

from trainspeed.cli import main
from trainspeed.data.sources import data_missing, detect_format
from trainspeed.data.verify_in_place import summarize_in_place, verify_in_place
from trainspeed.errors import UsageError


def _error_line(capsys: pytest.CaptureFixture) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_inspect_an_image_folder_as_lines_and_as_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_image_folder(tmp_path / "photos", per_class=2, classes=("ant", "bee"))
    assert main(["data", "inspect", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{root}: image-folder" and '  class_names: ["ant", "bee"]' in lines and "  images: 4" in lines
    assert main(["data", "inspect", str(root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["classes"] == 2 and summary["fewest_per_class"] == summary["most_per_class"] == 2


def test_inspect_a_token_file_gives_each_files_id_range(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "text"
    folder.mkdir()
    write_tokens(folder / "train.bin", 300, vocabulary=50)
    (folder / "val.bin").write_bytes(bytes([7, 0, 9, 0]))
    assert main(["data", "inspect", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["split"] == "val file" and summary["files"]["val.bin"] == {"dtype": "uint16", "ids": 2, "min": 7, "max": 9}
    assert summary["files"]["train.bin"]["ids"] == 300 and summary["files"]["train.bin"]["max"] < 50


def test_verify_of_an_image_folder_names_each_bad_image_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_image_folder(tmp_path / "photos", per_class=2, classes=("ant", "bee"))
    assert main(["data", "verify", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"{root}: OK, image folder of 2 classes, 4 images")
    corrupt(root / "ant" / "000.jpg")
    assert main(["data", "verify", str(root)]) == 1
    fail, summary = capsys.readouterr().out.splitlines()
    assert fail.startswith(f"FAIL {root / 'ant' / '000.jpg'}: ")
    assert summary.startswith(f"{root}: 1 problems (image folder of 2 classes")


def test_vocab_with_an_image_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = write_image_folder(tmp_path / "photos", per_class=1, classes=("ant",))
    assert main(["data", "verify", str(root), "--vocab", "100"]) == 2
    assert _error_line(capsys) == (f"trainspeed: error: --vocab: {root} is an image folder, which holds no token ids; "
                                   "drop --vocab")


def test_a_shard_set_is_verified_and_summarized_from_its_index_not_in_place(point_shards: Path) -> None:
    with pytest.raises(UsageError, match="a shards set is verified from its index"):
        verify_in_place(point_shards)
    with pytest.raises(UsageError, match="a shards set is summarized from its index"):
        summarize_in_place(point_shards)


@pytest.mark.parametrize(("make", "said"), [
    pytest.param(lambda p: p.write_text("hello"), "notes.txt: a file trainspeed does not read as data; give a "
                 "trainspeed shard set", id="file-of-another-kind"),
    pytest.param(lambda p: os.symlink(p.parent / "gone", p), "notes.txt: a symlink to nothing (or a symlink loop)",
                 id="link-to-nothing"),
    pytest.param(lambda p: os.mkfifo(p), "notes.txt: not a regular file or folder", id="fifo"),
    pytest.param(lambda p: (p.mkdir(), (p / "a.txt").write_text("-")), "notes.txt: holds no data trainspeed reads",
                 id="folder-of-other-files"),
])
def test_a_data_path_of_no_format_is_one_line_that_says_what_each_looks_like(tmp_path: Path, make, said: str) -> None:
    path = tmp_path / "notes.txt"
    make(path)
    with pytest.raises(UsageError) as raised:
        detect_format(path)
    assert str(raised.value).startswith(str(tmp_path)) and said in str(raised.value)
    assert len(str(raised.value).splitlines()) == 1 and data_missing(path) == str(raised.value)


def test_data_missing_says_why_a_path_holds_no_data_and_none_where_it_does(tmp_path: Path) -> None:
    assert data_missing(None) == data_missing("") == "no data given"
    assert data_missing(tmp_path / "nowhere") == f"{tmp_path / 'nowhere'}: no such file or folder"
    assert data_missing(write_tokens(tmp_path / "ids.bin", 10)) is None


HANG_GUARD_S = 30
"""How long a child that should answer at once may take before it counts as hung (not a timing
check: the answer comes in about a second, from a command's start)."""


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["verify", "inspect", "train"])
def test_a_fifo_named_like_a_tar_shard_is_one_line_not_a_hang(tmp_path: Path, command: str) -> None:
    """Opening a FIFO for reading waits for a writer: every reader of the shards refuses it unopened."""
    from child_commands import TESTS, run_trainspeed

    folder = write_tar_shards(tmp_path / "tars", shards=1)
    os.mkfifo(folder / "shard-000001.tar")
    argv = {"verify": ["data", "verify", str(folder)], "inspect": ["data", "inspect", str(folder)],
            "train": ["train", "--workload", "toy_workload:token_windows", "--data", str(folder), "--steps", "2",
                      "--num-workers", "0", "--out", str(tmp_path / "run")]}[command]
    result = run_trainspeed(*argv, path=(TESTS,), timeout=HANG_GUARD_S)
    assert result.returncode != 0 and result.stderr.strip().splitlines() == [
        f"trainspeed: error: {folder / 'shard-000001.tar'}: is a FIFO (named pipe), not a regular file"], result.stderr


@pytest.mark.e2e
def test_an_image_stored_as_a_path_to_a_device_or_a_fifo_is_a_problem_named_not_a_read_without_end(
        tmp_path: Path) -> None:
    """A dataset row may name its image by path: /dev/zero filled memory until the read failed, a FIFO
    waited for a writer. The child's address space is capped, so a read without end fails it fast."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from child_commands import run_child, trainspeed_argv, trainspeed_env
    from in_place_data import image_bytes

    pytest.importorskip("datasets")
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe.png")
    images = [{"bytes": image_bytes(i, (10, 8), "PNG"), "path": None} for i in range(4)]
    images[1] = {"bytes": None, "path": str(tmp_path / "zero.png")}
    images[2] = {"bytes": None, "path": str(tmp_path / "pipe.png")}
    table = pa.table({"image": pa.array(images, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                      "label": pa.array([0, 1, 2, 0], pa.int64())})
    data = tmp_path / "rows.parquet"
    pq.write_table(table, data)

    # the cap is set by a Python that then execs the command: a `preexec_fn` would run Python in a
    # fork of this process, which may have started JAX
    capped = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
              "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")
    python, *command = trainspeed_argv("data", "verify", str(data))
    result = run_child([python, "-P", "-c", capped, *command], timeout=HANG_GUARD_S,
                       env=trainspeed_env(HF_DATASETS_CACHE=str(tmp_path / "hf-cache")))
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[:2] == [
        f"FAIL {data} (train) row 1 ({tmp_path / 'zero.png'}): is a character device, not a regular file",
        f"FAIL {data} (train) row 2 ({tmp_path / 'pipe.png'}): is a FIFO (named pipe), not a regular file"]
