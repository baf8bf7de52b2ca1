"""Runs that cannot be lost or mixed up: one run per directory, checked resumes, each step logged once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from child_commands import start_child
from train_runs import TINY_RUN, train_command, train_env

from trainspeed.cli import main

RUN = ["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--log-every", "1"]


def _train(capsys: pytest.CaptureFixture, out: Path, *flags: str) -> tuple[int, str, str]:
    code = main([*RUN, "--out", str(out), *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainspeed: error:"), err
    return lines[0]


def test_resuming_a_finished_run_keeps_its_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _train(capsys, tmp_path, "--steps", "4")[0] == 0
    before = _snapshot(tmp_path)
    code, out, err = _train(capsys, tmp_path, "--steps", "4", "--resume")
    assert code == 0 and "already finished step 4 of 4" in out
    assert _snapshot(tmp_path) == before


def test_a_fresh_run_refuses_a_directory_that_holds_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _train(capsys, tmp_path, "--steps", "4")[0] == 0
    before = _snapshot(tmp_path)
    code, out, err = _train(capsys, tmp_path, "--steps", "6")
    assert code == 2 and "already holds a run; continue it with --resume" in _one_error_line(err)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--seed", "1"], "seed 0 -> 1"),
        (["--batch-size-per-device", "16"], "batch_size_per_device 8 -> 16"),
        (["--size", "small"], "size 'tiny' -> 'small'"),
        (["--lr", "1e-3"], "lr.base_lr 0.003 -> 0.001"),
    ],
)
def test_a_refused_resume_says_what_differs_and_changes_nothing(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _train(capsys, tmp_path, "--steps", "4", "--checkpoint-every", "2")[0] == 0
    before = _snapshot(tmp_path)
    code, out, err = _train(capsys, tmp_path, "--steps", "8", "--resume", *flags)
    assert code == 2 and named in _one_error_line(err)
    assert _snapshot(tmp_path) == before


def test_a_resume_records_what_changed_and_logs_each_step_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _train(capsys, tmp_path, "--steps", "4")[0] == 0
    code, out, err = _train(capsys, tmp_path, "--steps", "7", "--resume", "--eval-every", "0", "--num-workers", "0")
    assert code == 0, err
    (resume,) = [json.loads(line) for line in (tmp_path / "resumes.jsonl").read_text().splitlines()]
    assert resume["step"] == 4 and resume["changed"] == {"steps": [4, 7], "num_workers": [1, 0]}
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["kind"] == "train"]
    assert steps == list(range(1, 8))
    assert json.loads((tmp_path / "train_config.json").read_text())["steps"] == 7


def test_rows_a_killed_run_logged_after_its_checkpoint_are_dropped_on_resume(tmp_path: Path, capsys) -> None:
    assert _train(capsys, tmp_path, "--steps", "6", "--checkpoint-every", "3")[0] == 0
    # What a kill -9 between the checkpoints of steps 3 and 6 leaves: the latest checkpoint is 3,
    # metrics.jsonl holds steps 4 and 5 and a torn last line.
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "step-000000006.pt").unlink()
    (checkpoints / "latest").write_text("step-000000003.pt\n")
    (tmp_path / "summary.json").unlink()
    metrics = tmp_path / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    kept = [row for row in rows if row["kind"] == "train" and row["step"] <= 5]
    metrics.write_text("".join(json.dumps(row) + "\n" for row in kept) + '{"kind": "train", "st')
    assert _train(capsys, tmp_path, "--steps", "6", "--checkpoint-every", "3", "--resume")[0] == 0
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines() if '"train"' in line]
    assert steps == [1, 2, 3, 4, 5, 6]


@pytest.mark.e2e
def test_a_second_run_on_the_same_directory_is_refused_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The first run in a process of its own, the second command in this one: the lock is another
    process's, whichever process the refused command runs in."""
    first = start_child(train_command("--synthetic-data", "--batch-size-per-device", "8", "--steps", "100000",
                                           "--out", str(tmp_path)),
                             env=train_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "metrics.jsonl").exists():
            assert time.monotonic() < deadline and first.poll() is None, "the first run did not start"
            time.sleep(0.05)
        code, _, err = _train(capsys, tmp_path, "--steps", "4", "--resume")
    finally:
        first.terminate()
        first.wait(timeout=60)
    assert code == 2
    assert f"is in use by pid {first.pid}" in _one_error_line(err)


def test_an_unwritable_out_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, out, err = _train(capsys, blocker / "run", "--steps", "2")
    assert code == 2 and "cannot write to --out" in _one_error_line(err)

    results = blocker / "bench.jsonl"
    code = main(["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "8", "--no-progress", "--out", str(results)])
    assert code == 2 and "cannot write to --out" in _one_error_line(capsys.readouterr().err)


def test_result_files_follow_the_umask(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    previous = os.umask(0o022)
    try:
        assert _train(capsys, tmp_path, "--steps", "2")[0] == 0
    finally:
        os.umask(previous)
    for name in ("summary.json", "train_config.json", "checkpoints/latest"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


ORPHAN_KEEPER = r'''
import ctypes, json, os, subprocess, sys, time
import psutil

# Orphans are re-parented to this process (a subreaper) in the same session, so their process group
# is not orphaned and the kernel leaves them stopped: they stay alive as long as this test needs.
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL("libc.so.6").prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
out, command = sys.argv[1], json.loads(sys.argv[2])
launcher = subprocess.Popen(command, process_group=0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(out, "checkpoints", "latest")):
    if launcher.poll() is not None or time.monotonic() > deadline:
        print(json.dumps({"error": f"no checkpoint (exit code {launcher.poll()})"}), flush=True)
        sys.exit(1)
    time.sleep(0.05)
workers = psutil.Process(launcher.pid).children()
for worker in workers:
    worker.suspend()
launcher.kill()
launcher.wait()
print(json.dumps({"launcher": launcher.pid, "workers": [worker.pid for worker in workers]}), flush=True)
sys.stdin.readline()
for worker in workers:
    worker.kill()
    worker.wait()
'''


@pytest.mark.e2e
@pytest.mark.slow
def test_after_kill_9_of_the_launcher_its_orphaned_loader_workers_do_not_hold_the_run(
    tmp_path: Path, data_args: list[str], capsys: pytest.CaptureFixture
) -> None:
    """kill -9 of a one-rank run leaves its forked loader workers alive for a while (here: stopped,
    so for as long as the test needs); `--resume` must not be refused in the name of the dead pid.
    The resume runs in this process: the lock it takes is what is tested, not its process."""
    run = tmp_path / "run"
    common = [*data_args, "--batch-size-per-device", "16", "--num-workers", "2", "--checkpoint-every", "2"]
    command = train_command(*common, "--steps", "100000", "--out", str(run))
    keeper = start_child([sys.executable, "-c", ORPHAN_KEEPER, str(run), json.dumps(command)], env=train_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        killed = json.loads(keeper.stdout.readline())
        assert "error" not in killed, killed
        assert killed["workers"] and all(psutil.Process(pid).status() == psutil.STATUS_STOPPED
                                         for pid in killed["workers"]), "the run's loader workers are not alive"
        assert str(killed["launcher"]) in (run / ".lock").read_text(), "the lock does not name the killed launcher"
        step = int((run / "checkpoints" / "latest").read_text().strip()[len("step-"):-len(".pt")])
        code = main(["train", *TINY_RUN, *common, "--steps", str(step + 2), "--resume", "--out", str(run)])
        resumed = capsys.readouterr()
        assert all(psutil.pid_exists(pid) for pid in killed["workers"]), "the orphans died before the resume ended"
    finally:
        keeper.communicate("done\n", timeout=60)
    assert code == 0, resumed.out + resumed.err
    assert f"resumed from {run}/checkpoints/step-{step:09d}.pt at step {step}" in resumed.out


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
def test_a_run_is_never_mixed_into_a_folder_that_holds_a_dataset(
    resume: bool, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from trainspeed.data.dataset import write_dataset
    import numpy as np

    dataset = tmp_path / "dataset"
    write_dataset({"x": np.arange(10, dtype=np.int64)}, dataset)
    before = _snapshot(dataset)
    code, out, err = _train(capsys, dataset, "--steps", "2", *(["--resume"] if resume else []))
    line = _one_error_line(err)
    assert code == 2 and f"train: --out {dataset} holds a dataset (index.json, shard-000000.bin" in line, line
    assert _snapshot(dataset) == before and sorted(p.name for p in dataset.iterdir()) == [
        "index.json", "shard-000000.bin", "shard-000000.json", "writer.json"]


def test_a_lock_record_that_is_garbage_or_of_a_dead_process_names_no_holder() -> None:
    """A record is believed only while it describes a live process (one elsewhere cannot be seen)."""
    import socket

    from trainspeed.train.run_lock import LockHolder

    assert LockHolder.parse("not json") is None
    assert LockHolder.parse('{"pid": "one", "start_time": 0, "host": "h", "since": "s"}') is None
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert not LockHolder(pid=pid_max + 1, start_time=0.0, host=socket.gethostname(), since="s").is_running()
    assert LockHolder(pid=pid_max + 1, start_time=0.0, host=socket.gethostname() + "-elsewhere",
                      since="s").is_running()
    assert LockHolder.this_process().is_running()


@pytest.mark.e2e
def test_a_run_lock_held_without_a_record_is_refused_naming_no_holder(tmp_path: Path) -> None:
    """A process that took the lock but wrote no record yet (or a stale one): the run is refused all
    the same, without believing a record."""
    from child_commands import python_argv

    from trainspeed.errors import UsageError
    from trainspeed.train.run_lock import LOCK_FILE, hold_run_lock

    (tmp_path / LOCK_FILE).write_text('{"pid": 1, "start_time": 0, "host": "gone", "since": "then"}\n{')
    code = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\nsys.stdin.read()")
    holder = start_child(python_argv("-c", code, str(tmp_path / LOCK_FILE)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(UsageError) as refused:
            with hold_run_lock(tmp_path):
                pass
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert str(refused.value) == (f"train: run directory {tmp_path} is in use by another process (its record is stale "
                                  "or not written yet); wait for that run or choose another --out")
    with hold_run_lock(tmp_path):  # its holder gone, the lock is free
        pass
