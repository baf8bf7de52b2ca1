"""`--resume` on a damaged or tampered run directory: it continues from the newest valid checkpoint
and says so, or refuses in one line; it never restarts over a run's checkpoints, never deletes a
later checkpoint or a row it does not log again, and nothing in a checkpoint runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from train_runs import TINY_RUN, final_parameters, max_abs_difference, plant_payload

from trainspeed.cli import main
from trainspeed.train.checkpoint import load_checkpoint

RUN = ["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--log-every", "1",
       "--checkpoint-every", "3", "--num-workers", "0"]
STEP_3, STEP_6 = "step-000000003.pt", "step-000000006.pt"


def _train(capsys: pytest.CaptureFixture, out: Path, *flags: str) -> tuple[int, str, str]:
    code = main([*RUN, "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def six_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 6 steps with checkpoints at steps 3 and 6."""
    out = tmp_path_factory.mktemp("six_steps") / "run"
    assert main([*RUN, "--steps", "6", "--out", str(out)]) == 0
    return out


@pytest.fixture
def run_dir(six_steps: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(six_steps, copy)
    return copy


def _rows(run_dir: Path) -> list[str]:
    return (run_dir / "metrics.jsonl").read_text().splitlines()


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainspeed: error:"), err
    return lines[0]


@pytest.mark.parametrize(
    ("latest", "said"),
    [
        (None, "checkpoints/latest is missing"),
        ("step-000000009.pt\n", "checkpoints/latest names step-000000009.pt, which does not exist"),
        (b"\x00\xffgarbage\n", "checkpoints/latest holds binary data, not the name of a checkpoint of this run"),
        ("../../etc/passwd\n", "checkpoints/latest holds '../../etc/passwd', not the name of a checkpoint of this run"),
        ("../../elsewhere/checkpoints/step-000000006.pt\n", "not the name of a checkpoint of this run"),
    ],
    ids=["missing", "dangling", "garbage", "outside-the-run", "another-runs-checkpoint"],
)
def test_a_broken_latest_pointer_resumes_from_the_newest_valid_checkpoint_and_keeps_every_row(
    latest: str | bytes | None, said: str, run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    shutil.copytree(run_dir, run_dir.parent / "elsewhere")
    pointer = run_dir / "checkpoints" / "latest"
    if latest is None:
        pointer.unlink()
    elif isinstance(latest, bytes):
        pointer.write_bytes(latest)
    else:
        pointer.write_text(latest)
    rows_before = _rows(run_dir)
    code, out, err = _train(capsys, run_dir, "--steps", "8", "--resume")
    assert code == 0, err
    (note,) = [line for line in out.splitlines() if "newest valid checkpoint" in line]
    assert note.startswith("train: ") and said in note and f"resuming from {STEP_6}" in note
    assert "at step 6" in out and "starting from step 0" not in out
    assert _rows(run_dir)[: len(rows_before)] == rows_before, "a row of the steps before the resume was lost"
    assert {STEP_6, "step-000000008.pt"} <= {p.name for p in (run_dir / "checkpoints").glob("step-*.pt")}
    assert pointer.read_text() == "step-000000008.pt\n"


def _flip_a_bit_in_an_optimizer_tensor(path: Path) -> None:
    payload = load_checkpoint(path)
    first_moment = payload["trainable"]["optimizers"]["policy"]["state"][0]["exp_avg"]
    data, stored = bytearray(path.read_bytes()), first_moment.numpy().tobytes()
    offset = data.find(stored)
    assert offset >= 0 and data.find(stored, offset + 1) < 0, "the tensor's bytes are not found once in the file"
    data[offset + len(stored) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_bit_flip_in_an_optimizer_tensor_is_never_resumed_the_run_continues_from_the_checkpoint_before(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from_step_3 = tmp_path / "from_step_3"  # the same run, told plainly to continue from step 3
    shutil.copytree(run_dir, from_step_3)
    (from_step_3 / "checkpoints" / "latest").write_text(STEP_3 + "\n")
    assert _train(capsys, from_step_3, "--steps", "8", "--resume")[0] == 0

    flipped = run_dir / "checkpoints" / STEP_6
    _flip_a_bit_in_an_optimizer_tensor(flipped)
    damaged = flipped.read_bytes()
    code, out, err = _train(capsys, run_dir, "--steps", "8", "--resume")
    assert code == 0, err
    assert f"train: {STEP_6} fails its sha256 check (it changed after it was written); resuming from {STEP_3}, " \
           "the newest valid checkpoint" in out
    assert "at step 3" in out
    assert max_abs_difference(final_parameters(run_dir), final_parameters(from_step_3)) == 0.0
    assert (run_dir / "checkpoints" / "superseded" / "1" / STEP_6).read_bytes() == damaged  # kept to look at


def test_checkpoints_after_the_step_a_run_resumes_from_are_moved_aside_never_overwritten(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoints = run_dir / "checkpoints"
    (checkpoints / "latest").write_text(STEP_3 + "\n")  # continue from step 3 although step 6 is valid
    later = {name: (checkpoints / name).read_bytes() for name in (STEP_6, STEP_6 + ".sha256")}
    code, out, err = _train(capsys, run_dir, "--steps", "9", "--resume")
    assert code == 0, err
    aside = checkpoints / "superseded" / "1"
    assert f"train: moved the checkpoints after step 3 ({STEP_6}) to {aside}, where the resumed run cannot " \
           "overwrite them" in out
    assert {name: (aside / name).read_bytes() for name in later} == later
    assert (checkpoints / "latest").read_text() == "step-000000009.pt\n"


def test_a_planted_pickle_payload_never_runs_resume_refuses_in_one_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    marker = tmp_path / "payload-ran"
    plant_payload(run_dir, marker)
    before = _snapshot(run_dir)
    code, out, err = _train(capsys, run_dir, "--steps", "8", "--resume")
    assert not marker.exists(), "the checkpoint ran code"
    assert code == 2
    line = _one_error_line(err)
    assert f"{STEP_6} holds objects other than tensors and plain data" in line and "no valid checkpoint is left" in line
    assert _snapshot(run_dir) == before


def test_a_run_whose_checkpoints_are_all_gone_is_refused_not_restarted(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    for path in (run_dir / "checkpoints").glob("step-*"):
        path.unlink()
    before = _snapshot(run_dir)
    code, out, err = _train(capsys, run_dir, "--steps", "8", "--resume")
    assert code == 2
    assert "checkpoints/latest names step-000000006.pt, which does not exist; no valid checkpoint is left" \
        in _one_error_line(err)
    assert _snapshot(run_dir) == before


def test_temporary_files_of_an_interrupted_write_are_removed_by_the_next_run(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    checkpoints = run_dir / "checkpoints"
    leftovers = [checkpoints / ".step-000000009.pt.k2j4x9_a.tmp", checkpoints / ".step-000000009.pt.sha256.q1w2e3r4.tmp",
                 checkpoints / ".latest.zz81mmq0.tmp", run_dir / ".metrics.jsonl.a1b2c3d4.tmp",
                 run_dir / ".summary.json.e5f6g7h8.tmp"]
    others = [checkpoints / ".notes.tmp", run_dir / ".my-own.draft.tmp", run_dir / "keep.tmp"]
    for path in leftovers + others:
        path.write_bytes(b"half a file")
    assert _train(capsys, run_dir, "--steps", "7", "--resume")[0] == 0
    assert [path.name for path in leftovers if path.exists()] == []
    assert all(path.read_bytes() == b"half a file" for path in others)


def test_rows_without_a_step_survive_a_resume_and_a_summary_row_of_the_steps_kept_too(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    metrics = run_dir / "metrics.jsonl"
    with metrics.open("a") as handle:
        handle.write(json.dumps({"kind": "note", "text": "a row of another tool"}) + "\n")
    rows_before = _rows(run_dir)
    assert any(json.loads(row)["kind"] == "train-summary" for row in rows_before)
    assert _train(capsys, run_dir, "--steps", "8", "--resume")[0] == 0
    assert _rows(run_dir)[: len(rows_before)] == rows_before



def test_a_torn_last_line_that_is_not_utf8_is_dropped_by_the_resume_and_every_whole_row_kept(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    metrics = run_dir / "metrics.jsonl"
    rows_before = _rows(run_dir)
    with metrics.open("ab") as handle:
        handle.write(b'{"kind": "train", "step": 7, "loss": "\xff\xfe')
    assert _train(capsys, run_dir, "--steps", "8", "--resume")[0] == 0
    assert _rows(run_dir)[: len(rows_before)] == rows_before
    assert b"\xff" not in metrics.read_bytes()

@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["fifo", "symlink-to-dev-zero"])
def test_a_checkpoint_that_is_no_regular_file_is_never_read_the_resume_continues_from_the_one_before(
    kind: str, run_dir: Path
) -> None:
    """A FIFO would block its reader for ever, /dev/zero never ends: neither is opened for hashing
    or loading (a subprocess with a deadline, since a hang is what this guards against)."""
    import os

    from train_runs import run_train

    newest = run_dir / "checkpoints" / STEP_6
    newest.unlink()
    if kind == "fifo":
        os.mkfifo(newest)
    else:
        newest.symlink_to("/dev/zero")
    result = run_train(*RUN[len(["train", *TINY_RUN]):], "--steps", "8", "--out", str(run_dir), "--resume", timeout=120)
    assert result.returncode == 0, result.stderr
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert f"train: {STEP_6} is {what}, not a regular file; resuming from {STEP_3}, the newest valid checkpoint" \
        in result.stdout
    assert "at step 3" in result.stdout


def test_a_symlinked_latest_pointer_is_not_followed_and_its_target_never_quoted(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    pointer = run_dir / "checkpoints" / "latest"
    pointer.unlink()
    pointer.symlink_to("/etc/passwd")
    code, out, err = _train(capsys, run_dir, "--steps", "8", "--resume")
    assert code == 0, err
    assert "checkpoints/latest is a symbolic link, not the file the trainer writes (it is not followed); resuming " \
           f"from {STEP_6}" in out
    assert "root:" not in out + err and "/bin/" not in out + err
