"""The studies train on data read where it lies as on trainspeed's own shards: `study
time-to-target` takes a `--data` of every format, and a user's workload's data in a format of its
own, refuses one that is no data before anything runs, and (end to end) its runs read a token file
in place and record what they read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from in_place_data import snapshot, write_hf_images, write_image_folder, write_tar_shards, write_tokens

from trainspeed.cli import main
from trainspeed.data.sources import FORMATS_HELP

STUDY = ["study", "time-to-target", "--preset", "smoke", "--workload", "toy_workload:token_windows",
         "--until", "val/accuracy>=0.5", "--global-batches", "16,32", "--seeds", "1", "--num-workers", "0"]


def _data(tmp_path: Path, kind: str) -> Path:
    if kind == "token-file":
        return write_tokens(tmp_path / "text.bin", 20_000, vocabulary=256)
    if kind == "image-folder":
        return write_image_folder(tmp_path / "photos", per_class=2)
    if kind == "hf-dataset":
        pytest.importorskip("datasets")
        return write_hf_images(tmp_path / "hf", count=3)
    if kind == "tar-shards":
        return write_tar_shards(tmp_path / "tars", shards=1, per_shard=2)
    if kind == "empty-folder":
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty"
    (tmp_path / "notes.txt").write_text("not data")
    return tmp_path / "notes.txt"


@pytest.mark.parametrize(("kind", "said"), [
    pytest.param(kind, said, id=kind) for kind, said in [
        ("token-file", None), ("image-folder", None), ("hf-dataset", None), ("tar-shards", None),
        ("empty-folder", "empty: an empty folder; give a trainspeed shard set"),
        ("file-of-another-kind", "notes.txt: a file trainspeed does not read as data")]
])
def test_the_study_takes_data_of_every_format_and_refuses_what_is_no_data_before_any_run(
        tmp_path: Path, kind: str, said: str | None, cli_error) -> None:
    _check_taken_or_refused(cli_error, [*STUDY, "--data", str(_data(tmp_path, kind))], tmp_path, said)


def _check_taken_or_refused(cli_error, argv: list[str], tmp_path: Path, said: str | None) -> None:
    """The study `argv` with --max-hours below any estimate: data it takes reaches the estimate and
    stops there, data it refuses is the line `said` (a path under `tmp_path`); neither writes a row."""
    error = cli_error(*argv, "--max-hours", "1e-9", "--out", str(tmp_path / "study"))
    if said is None:
        assert "the estimate is" in error and "longer than --max-hours" in error, error
    else:
        assert f"time-to-target study: --data {tmp_path}/{said}" in error, error
    assert not (tmp_path / "study" / "time_to_target.jsonl").exists()


CNN_STUDY = ["study", "time-to-target", "--preset", "smoke", "--workload", "small_cnn_workload:SmallCNNWorkload",
             "--until", "val/top1_accuracy>=0.9", "--global-batches", "16,32", "--seeds", "1", "--num-workers", "0"]


@pytest.mark.parametrize(("kind", "said"), [
    pytest.param("its-own-npz", None, id="its-own-npz"),
    pytest.param("other-arrays", "shapes.npz: not an image .npz dataset with images and labels", id="other-arrays"),
    pytest.param("a-damaged-npz", "shapes.npz: the workload small_cnn_workload:SmallCNNWorkload cannot open it "
                                  "(BadZipFile", id="a-damaged-npz"),
    pytest.param("nothing-there", "shapes.npz: no such file or folder", id="nothing-there")])
def test_the_study_takes_a_user_workload_s_own_format_and_refuses_what_its_workload_cannot_open(
        tmp_path: Path, kind: str, said: str | None, cli_error, monkeypatch: pytest.MonkeyPatch) -> None:
    """The small CNN example reads one .npz file, no format of trainspeed's: `train` takes it, and so
    must a study that starts trains on it; whether it is data is the workload's own answer."""
    from child_commands import EXAMPLES

    monkeypatch.syspath_prepend(str(EXAMPLES))
    from small_cnn_workload import write_dataset

    data = tmp_path / "shapes.npz"
    if kind == "its-own-npz":
        write_dataset(data, samples=64)
    elif kind == "other-arrays":
        np.savez(data, tokens=np.zeros(8))
    elif kind == "a-damaged-npz":
        data.write_bytes(b"PK\x03\x04 cut short")
    _check_taken_or_refused(cli_error, [*CNN_STUDY, "--data", str(data)], tmp_path, said)


def test_a_built_in_workload_s_data_is_asked_of_trainspeed_s_formats_alone(tmp_path: Path) -> None:
    """Only a module of the user's own opens its data itself; a built-in workload's is refused by its
    format, before any workload code runs."""
    from trainspeed.workloads import data_missing_for

    (tmp_path / "games.npz").write_bytes(b"not shards")
    assert data_missing_for("mahjong", "tiny", tmp_path / "games.npz") == (
        f"{tmp_path}/games.npz: a file trainspeed does not read as data; give {FORMATS_HELP}")


@pytest.mark.e2e
def test_a_time_to_target_study_trains_on_a_token_file_read_in_place(tmp_path: Path, monkeypatch,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """Two runs of the toy on windows of a uint16 `.bin` (children); each records the file it read."""
    from child_commands import TESTS

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    data = write_tokens(tmp_path / "text.bin", 20_000, vocabulary=256)
    before = snapshot(tmp_path)
    assert main([*STUDY, "--data", "text.bin", "--base-lr", "2", "--out", "study", "--no-progress"]) == 0
    assert "reached by all 1 seeds" in capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "study" / "time_to_target.jsonl").read_text().splitlines()]
    runs = [row for row in rows if row["kind"] == "time-to-target-study-run"]
    assert sorted(run["global_batch"] for run in runs) == [16, 32] and all(run["reached"] for run in runs)
    records = [json.loads((tmp_path / run["run_dir"] / "summary.json").read_text())["data"] for run in runs]
    assert {(record["format"], record["path"], record["files"]) for record in records} == {("tokens", "text.bin", 1)}
    assert len({record["fingerprint"] for record in records}) == 1 and data.stat().st_size == 40_000
    assert {name: state for name, state in snapshot(tmp_path).items() if name in before} == before
