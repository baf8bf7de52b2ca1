"""Folders the dataset writers are pointed at: a folder is extended only by the writer that made it,
with the same settings; anything else is one line before anything is written. And a writer killed
at any moment leaves a folder that a rerun completes and that `verify` refuses until then."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from child_commands import start_child, trainspeed_argv

from trainspeed.cli import main


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def selfplay_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("writers") / "selfplay"
    assert main(["data", "mahjong-selfplay", "--games", "2", "--games-per-shard", "1", "--seed", "3",
                 "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def mjai_set(selfplay_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("writers") / "mjai"
    assert main(["data", "from-mjai", str(selfplay_set / "mjai"), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def arrays_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("writers")
    np.savez(folder / "arrays.npz", x=np.arange(40, dtype=np.int64))
    out = folder / "arrays"
    assert main(["data", "from-arrays", str(folder / "arrays.npz"), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("writers") / "run"
    assert main(["train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "1",
                 "--batch-size-per-device", "4", "--num-workers", "0", "--out", str(out), "--no-progress"]) == 0
    return out


FOLDERS = {"from-mjai set": ("mjai_set", "holds a dataset of `trainspeed data from-mjai`"),
           "from-arrays set": ("arrays_set", "holds a dataset of `trainspeed data from-arrays`"),
           "run directory": ("run_dir", "holds a training run ("),
           "selfplay set": ("selfplay_set", "holds a dataset of `trainspeed data mahjong-selfplay`")}

WRITERS = {
    "mahjong-selfplay": lambda out, inputs: ["data", "mahjong-selfplay", "--games", "4", "--seed", "3",
                                             "--games-per-shard", "1", "--out", str(out), "--no-progress"],
    "from-mjai": lambda out, inputs: ["data", "from-mjai", str(inputs["logs"]), "--out", str(out)],
    "from-arrays": lambda out, inputs: ["data", "from-arrays", str(inputs["npz"]), "--out", str(out)],
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("folder", list(FOLDERS))
def test_a_writer_never_writes_into_a_folder_of_another_writer_or_a_run(
        writer: str, folder: str, request: pytest.FixtureRequest, selfplay_set: Path, tmp_path: Path,
        cli_error, capsys: pytest.CaptureFixture) -> None:
    fixture, said = FOLDERS[folder]
    if (writer, folder) in {("mahjong-selfplay", "selfplay set"), ("from-mjai", "from-mjai set"),
                            ("from-arrays", "from-arrays set")}:
        pytest.skip("a writer's own folder: see the tests of extending and completing it")
    target = request.getfixturevalue(fixture)
    np.savez(tmp_path / "other.npz", y=np.arange(8, dtype=np.int32))
    inputs = {"logs": selfplay_set / "mjai", "npz": tmp_path / "other.npz"}
    before = _snapshot(target)
    line = cli_error(*WRITERS[writer](target, inputs))
    assert f"--out {target}: {said}" in line and "nothing there is changed" in line, line
    assert _snapshot(target) == before, "a refused writer changed the folder"


def test_selfplay_into_an_imported_set_keeps_every_imported_game(mjai_set: Path, cli_error) -> None:
    """16 imported games once became 4 self-play games, and `verify` said OK."""
    index = json.loads((mjai_set / "index.json").read_text())
    cli_error("data", "mahjong-selfplay", "--games", "1", "--out", str(mjai_set), "--no-progress")
    assert json.loads((mjai_set / "index.json").read_text()) == index
    assert main(["data", "verify", str(mjai_set)]) == 0


def test_a_folder_with_files_of_someone_else_is_refused_by_every_writer(tmp_path: Path, selfplay_set: Path,
                                                                         cli_error) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("kept")
    np.savez(tmp_path / "a.npz", y=np.arange(8, dtype=np.int32))
    for writer, argv in WRITERS.items():
        line = cli_error(*argv(folder, {"logs": selfplay_set / "mjai", "npz": tmp_path / "a.npz"}))
        assert f"holds files of something else (notes.txt), not a dataset of `trainspeed data {writer}`" in line
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_selfplay_extends_its_own_set_of_the_same_seed_and_never_shrinks_it(selfplay_set: Path, tmp_path: Path,
                                                                            cli_error) -> None:
    import shutil

    folder = tmp_path / "grown"
    shutil.copytree(selfplay_set, folder)
    assert main(["data", "mahjong-selfplay", "--games", "3", "--games-per-shard", "1", "--seed", "3",
                 "--out", str(folder), "--no-progress"]) == 0
    assert json.loads((folder / "index.json").read_text())["games"] == 3
    before = _snapshot(folder)
    line = cli_error("data", "mahjong-selfplay", "--games", "2", "--games-per-shard", "1", "--seed", "3",
                     "--out", str(folder), "--no-progress")
    assert "already holds games up to id 2; use --games 3 or more to extend it" in line
    assert _snapshot(folder) == before


def _kill_when(command: list[str], appears: Path, timeout_s: float = 120) -> None:
    """Start a writer and kill -9 it as soon as `appears` exists: in the middle of its work."""
    with tempfile.TemporaryFile(mode="w+") as output:  # not a pipe: a full pipe would stop the writer
        process = start_child(trainspeed_argv(*command), start_new_session=True, stdout=output,
                              stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout_s
        while not appears.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        ended = process.poll()
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended on its own, and every process it started too
            pass
        process.wait(timeout=30)
        output.seek(0)
        assert ended is None and appears.exists(), \
            f"{appears.name} did not appear while the writer ran (exit code {ended}): {output.read()[-3000:]}"


def _verify_refuses_in_one_line(folder: Path, capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    code = main(["data", "verify", str(folder)])
    printed = capsys.readouterr()
    lines = printed.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: "), (code, printed)
    assert printed.out == "", "a partial set was reported"
    return lines[0]


def _verify_ok(folder: Path, shards: int, capsys: pytest.CaptureFixture) -> None:
    capsys.readouterr()
    code = main(["data", "verify", str(folder)])
    printed = capsys.readouterr()
    assert code == 0 and f"OK, {shards} shards" in printed.out, (code, printed)


@pytest.mark.e2e
@pytest.mark.parametrize("extending", [False, True], ids=["fresh", "extending-a-finished-set"])
def test_selfplay_killed_mid_write_is_refused_by_verify_and_completed_by_a_rerun(
        extending: bool, selfplay_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import shutil

    folder = tmp_path / "set"
    if extending:
        shutil.copytree(selfplay_set, folder)  # 2 finished games
    command = ["data", "mahjong-selfplay", "--games", "6", "--games-per-shard", "1", "--seed", "3",
               "--out", str(folder), "--no-progress"]
    _kill_when(command, folder / "shard-000003.json")
    line = _verify_refuses_in_one_line(folder, capsys)
    assert "an unfinished write of `trainspeed data mahjong-selfplay`" in line, line
    assert main(["data", "inspect", str(folder)]) == 2, "inspect showed a partial set"
    assert main(command) == 0  # the rerun in this process: the writer killed above is the child that matters
    _verify_ok(folder, 6, capsys)
    assert json.loads((folder / "index.json").read_text())["games"] == 6


@pytest.mark.e2e
def test_from_arrays_killed_mid_write_is_refused_by_verify_and_written_whole_by_a_rerun(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "arrays.npz"
    np.savez_compressed(source, x=np.arange(4000, dtype=np.int64), y=np.zeros((4000, 3), dtype=np.float32))
    out = tmp_path / "data"
    command = ["data", "from-arrays", str(source), "--out", str(out), "--samples-per-shard", "10"]
    _kill_when(command, out / "shard-000005.json")
    line = _verify_refuses_in_one_line(out, capsys)
    assert "an unfinished write of `trainspeed data from-arrays`" in line, line
    assert main(command) == 0  # the rerun in this process: the writer killed above is the child that matters
    _verify_ok(out, 400, capsys)


def _npz(folder: Path) -> Path:
    path = folder / "arrays.npz"
    np.savez(path, x=np.arange(40, dtype=np.int64))
    return path


@pytest.mark.parametrize(("record", "said"), [
    ("fifo", "writer.json: is a FIFO (named pipe), not a regular file"),
    (b"\xff\xfe not text", "writer.json: not the record a trainspeed writer keeps (writer, settings, finished)"),
    ('{"writer": "from-arrays", "settings": {}}', "writer.json: not the record a trainspeed writer keeps"),
    ('["from-arrays"]', "writer.json: not the record a trainspeed writer keeps"),
], ids=["a-fifo", "not-text", "no-finished", "a-list"])
def test_a_folder_whose_writer_record_is_no_record_is_refused_and_kept(
        tmp_path: Path, cli_error, record: str | bytes, said: str) -> None:
    """The record comes with the folder, from wherever it came from: a FIFO in its place is never
    waited on, and nothing there is written over."""
    out = tmp_path / "data"
    out.mkdir()
    if record == "fifo":
        os.mkfifo(out / "writer.json")
    elif isinstance(record, bytes):
        (out / "writer.json").write_bytes(record)
    else:
        (out / "writer.json").write_text(record)
    line = cli_error("data", "from-arrays", str(_npz(tmp_path)), "--out", str(out))
    assert line.startswith(f"trainspeed: error: {out / said}"), line
    assert [p.name for p in out.iterdir()] == ["writer.json"]


def test_a_shard_set_that_records_no_writer_or_a_file_as_out_is_refused(tmp_path: Path, cli_error) -> None:
    unclaimed = tmp_path / "unclaimed"
    unclaimed.mkdir()
    (unclaimed / "index.json").write_text("{}\n")
    line = cli_error("data", "from-arrays", str(_npz(tmp_path)), "--out", str(unclaimed))
    assert f"--out {unclaimed}: holds a shard set that records no writer (index.json), not a dataset of " \
           "`trainspeed data from-arrays`" in line, line
    assert (unclaimed / "index.json").read_text() == "{}\n"
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    line = cli_error("data", "from-arrays", str(_npz(tmp_path)), "--out", str(a_file))
    assert line == f"trainspeed: error: --out {a_file}: is not a folder; give a new or empty folder"
    assert a_file.read_text() == "mine"


def test_selfplay_extends_a_set_it_made_before_folders_recorded_their_writer(selfplay_set: Path,
                                                                            tmp_path: Path) -> None:
    """Such a set said its settings in selfplay.json alone: the same settings are its own."""
    import shutil

    folder = tmp_path / "older"
    shutil.copytree(selfplay_set, folder)
    settings = json.loads((folder / "writer.json").read_text())["settings"]
    (folder / "writer.json").unlink()
    (folder / "selfplay.json").write_text(json.dumps(settings))
    assert main(["data", "mahjong-selfplay", "--games", "3", "--games-per-shard", "1", "--seed", "3",
                 "--out", str(folder), "--no-progress"]) == 0
    assert json.loads((folder / "index.json").read_text())["games"] == 3
    assert json.loads((folder / "writer.json").read_text())["finished"] is True


def test_a_rerun_of_an_unfinished_from_arrays_write_clears_what_it_left_first(tmp_path: Path) -> None:
    """An unfinished set is the writer's own: everything in it but the record goes, folders too,
    and the set is written whole again."""
    source = _npz(tmp_path)
    out = tmp_path / "data"
    assert main(["data", "from-arrays", str(source), "--out", str(out)]) == 0
    record = json.loads((out / "writer.json").read_text())
    (out / "writer.json").write_text(json.dumps({**record, "finished": False}))  # as a kill -9 leaves it
    (out / "index.json").unlink()
    (out / "left-behind").mkdir()
    (out / "left-behind" / "part").write_text("x")
    assert main(["data", "from-arrays", str(source), "--out", str(out)]) == 0
    assert not (out / "left-behind").exists()
    assert main(["data", "verify", str(out)]) == 0
