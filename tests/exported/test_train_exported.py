"""`trainspeed train --exported DIR --data SHARDS` trains the exported steps where only JAX is: the
shard loader's batches in its order, the run's LR rule, validation through the exported eval
program, a goal, checkpoints and resume, into a run folder that `report` and `plan` read, and the
noise-scale meter over the step in slices exported beside the plain one. It imports no torch.

Proof of sameness: at the same seed, batch and steps, its validations equal those of the torch
trainer on `cpu:eager:fp32` (the session's `tiny_run`) within fp32 tolerance, and a run killed and
resumed ends with the same state as one that was not.
"""

from __future__ import annotations

import io
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_child, start_child
from without_torch import trainspeed_without_torch

from trainspeed.cli import main
from trainspeed.flags import machine_cpus
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.long,  # minutes in all: started first (tests/conftest.py)
    pytest.mark.e2e,
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

BATCH = 32
AS_TINY_RUN = ["--batch-size-per-device", str(BATCH), "--steps", "6", "--eval-every", "3", "--eval-batches", "2",
               "--log-every", "2", "--no-progress"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exported") / "mahjong-tiny"
    assert main(["export", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", f"{BATCH},64", "--noise-scale-micro-batches", "2", "--out", str(folder)]) == 0
    return folder


def train_without_torch(*args: str, timeout: float = 300):
    return run_child(trainspeed_without_torch("train", *args), timeout=timeout)


def rows(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if row["kind"] == kind]


def test_validations_equal_the_torch_trainers_at_the_same_seed_batch_and_steps(
        exported: Path, selfplay_data: Path, tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = train_without_torch("--exported", str(exported), "--data", str(selfplay_data), *AS_TINY_RUN,
                                 "--out", str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    ours, torch_trainer = rows(run, "val"), rows(tiny_run, "val")
    assert [row["step"] for row in ours] == [row["step"] for row in torch_trainer] == [3, 6]
    for mine, theirs in zip(ours, torch_trainer):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
        assert mine["samples"] == theirs["samples"] == 2 * BATCH
    train_rows = rows(run, "train")
    assert [row["step"] for row in train_rows] == [2, 4, 6]
    assert [row["lr"] for row in train_rows] == pytest.approx([row["lr"] for row in rows(tiny_run, "train")], rel=1e-6)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kind"] == "train-summary" and summary["target"] == "jax:jit:fp32"
    assert summary["data"]["exported"] == str(exported) and summary["last_step"] == 6


def test_a_goal_is_watched_and_report_and_plan_read_the_run(exported: Path, selfplay_data: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A run to its goal that measured its noise scale (one step in 2) is a base run of `plan`,
    with the bench rows of the same exported steps: the plan's steps come from its noise scale."""
    run = tmp_path / "goal"
    assert main(["train", "--exported", str(exported), "--data", str(selfplay_data), "--batch-size-per-device",
                 str(BATCH), "--steps", "40", "--eval-every", "10", "--until", "val/accuracy>=0.05",
                 "--stop-at-target", "--noise-scale-micro-batches", "2", "--noise-scale-every", "2", "--log-every", "5",
                 "--no-progress", "--out", str(run)]) == 0
    assert "time to target val/accuracy>=0.05: reached at step 10" in capsys.readouterr().out
    record = rows(run, "time-to-target")[-1]
    assert record["reached"] and record["step"] == 10
    assert [(row["step"], row["measured_steps"], row["measure_every"]) for row in rows(run, "noise-scale")] == [
        (5, 3, 2), (10, 5, 2)]
    assert main(["report", str(run), "--out", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 0
    # A step time per batch size is all the plan reads of the bench: one short window each, and a peak
    # given rather than probed (tests/exported/test_export_and_bench.py checks the probe).
    bench = tmp_path / "bench.jsonl"
    assert main(["bench", "--exported", str(exported), "--batch-sizes", f"{BATCH},64", "--warmup-steps", "1",
                 "--windows", "1", "--min-window-s", "0.01", "--peak-tflops", "1", "--no-plot", "--out", str(bench)]) == 0
    capsys.readouterr()
    plan = tmp_path / "plan.jsonl"
    assert main(["plan", str(bench), str(run), "--schedules", "fixed", "--checked", str(run), "--out", str(plan)]) == 0
    said = capsys.readouterr().out
    assert "McCandlish's model" in said and f"through the 10.0 steps of run {run}" in said, said
    planned = [json.loads(line) for line in plan.read_text().splitlines()]
    own = next(row for row in planned if row["kind"] == "plan" and row["config"] == f"jax:jit:fp32/1/{BATCH}")
    assert own["validation_s"] > 0  # the window rows' run clocks hold the validations' pauses
    check = next(row for row in planned if row["kind"] == "plan-check")
    summary = json.loads((run / "summary.json").read_text())
    assert (check["config"], check["measured_from"], check["reached"]) == (f"jax:jit:fp32/1/{BATCH}", "run", True)
    assert check["measured_s"] == pytest.approx(summary["startup_s"] + record["wall_s"])
    assert main(["plan", str(bench), str(run), "--checked", str(run)]) != 0
    assert "--checked needs --out" in capsys.readouterr().err
    elsewhere = tmp_path / "elsewhere.jsonl"
    assert main(["plan", str(bench), str(run), "--global-batches", "64", "--checked", str(run),
                 "--out", str(elsewhere)]) != 0
    assert f"the plan has no row of its configuration jax:jit:fp32/1/{BATCH}" in capsys.readouterr().err
    assert not elsewhere.exists()  # read before anything is written


def test_the_meter_over_the_step_in_slices_trains_what_the_plain_step_trains(
        exported: Path, selfplay_data: Path, tiny_run: Path, tmp_path: Path) -> None:
    """Measured at every step, each step runs over two random halves of its batch and updates on
    their mean: the validations are the torch trainer's (whose steps ran whole) within fp32's
    tolerance, and each logged window has a row of the two batches' norms."""
    run = tmp_path / "metered"
    result = train_without_torch("--exported", str(exported), "--data", str(selfplay_data), *AS_TINY_RUN,
                                 "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--out", str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    for mine, theirs in zip(rows(run, "val"), rows(tiny_run, "val"), strict=True):
        assert mine["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
    noise = rows(run, "noise-scale")
    assert [(row["step"], row["method"], row["small_batch"], row["big_batch"], row["measured_steps"])
            for row in noise] == [(2, "micro-batches", 16, 32, 2), (4, "micro-batches", 16, 32, 4),
                                  (6, "micro-batches", 16, 32, 6)]
    assert all(row["trace_sigma"] > 0 and row["window_steps"] == 2 for row in noise)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["noise_scale_readings"]["policy"]["measured_steps"] == 6
    config = json.loads((run / "train_config.json").read_text())
    assert (config["noise_scale"], config["noise_scale_micro_batches"]) == ("on", 2)


def test_a_resumed_run_measures_on_from_its_checkpoint_as_one_never_stopped(
        exported: Path, selfplay_data: Path, tmp_path: Path) -> None:
    """The run's last checkpoint lost (as a kill after the one before it would), the resumed run
    draws the same partitions and carries the moving averages: its rows after the checkpoint are
    the uninterrupted run's."""
    flags = ["--exported", str(exported), "--data", str(selfplay_data), "--batch-size-per-device", str(BATCH),
             "--steps", "6", "--log-every", "3", "--checkpoint-every", "3", "--keep-checkpoints", "0",
             "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--no-progress"]
    whole = tmp_path / "whole"
    assert main(["train", *flags, "--out", str(whole)]) == 0
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in ("train_config.json", "metrics.jsonl"):
        (resumed / name).write_bytes((whole / name).read_bytes())
    (resumed / "checkpoints").mkdir()
    for name in ("step-000000003.npz", "step-000000003.npz.sha256"):
        (resumed / "checkpoints" / name).write_bytes((whole / "checkpoints" / name).read_bytes())
    assert main(["train", *flags, "--resume", "--out", str(resumed)]) == 0
    after, before = rows(resumed, "noise-scale"), rows(whole, "noise-scale")
    assert [row["step"] for row in after] == [row["step"] for row in before] == [3, 6]
    for mine, theirs in zip(after, before):
        for key in ("b_simple", "b_simple_avg", "grad_sq_avg", "trace_sigma_avg", "measured_steps"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5), key


def final_leaves(run: Path) -> list[np.ndarray]:
    last = sorted((run / "checkpoints").glob("step-*.npz"))[-1]
    with np.load(io.BytesIO(last.read_bytes()), allow_pickle=False) as loaded:
        return [loaded[name] for name in sorted(loaded.files) if name.startswith("leaf")]


def test_a_run_killed_and_resumed_ends_with_the_state_of_one_never_stopped(
        exported: Path, selfplay_data: Path, tmp_path: Path) -> None:
    """Killed (SIGKILL) once its first checkpoint (step 5 of 30) is written, before its end, and
    resumed: the steps after that checkpoint, a validation among them, end with the state of the
    run never stopped."""
    flags = ["--exported", str(exported), "--data", str(selfplay_data), "--batch-size-per-device", str(BATCH),
             "--steps", "30", "--checkpoint-every", "5", "--eval-every", "15", "--no-progress"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", *flags, "--out", str(whole)]) == 0
    child = start_child([sys.executable, "-m", "trainspeed", "train", *flags, "--out", str(killed)])
    first = killed / "checkpoints" / "step-000000005.npz"
    deadline = time.monotonic() + 240
    while not first.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert first.exists() and child.returncode == -signal.SIGKILL  # the kill landed before the run's end
    assert main(["train", *flags, "--resume", "--out", str(killed)]) == 0
    for uninterrupted, after_resume in zip(final_leaves(whole), final_leaves(killed), strict=True):
        np.testing.assert_allclose(after_resume, uninterrupted, rtol=1e-6, atol=1e-7)
    assert [row["step"] for row in rows(killed, "val")] == [15, 30]
    assert json.loads((killed / "summary.json").read_text())["last_step"] == 30


def test_a_diverging_run_stops_at_its_first_non_finite_loss_with_no_checkpoint_of_it(
        exported: Path, selfplay_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "diverged"
    assert main(["train", "--exported", str(exported), "--data", str(selfplay_data), "--batch-size-per-device",
                 str(BATCH), "--steps", "60", "--lr", "1e6", "--lr-scaling", "none", "--log-every", "5",
                 "--checkpoint-every", "5", "--eval-every", "20", "--no-progress", "--out", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    diverged_at = summary["diverged_at_step"]
    assert diverged_at is not None and summary["last_step"] < 60
    assert "diverged" in capsys.readouterr().out
    saved = [int(path.stem.split("-")[1]) for path in (run / "checkpoints").glob("step-*.npz")]
    assert all(step < diverged_at for step in saved)
    assert main(["report", str(run), "--out", str(tmp_path / "report.html")]) == 0


@pytest.mark.parametrize("flags, says", [
    (["--nproc", "2"], "--nproc/--nnodes is not for exported steps"),
    (["--batch-size-per-device", "48"], "batch size 48 was not exported"),
    (["--batch-schedule", "auto"], "--batch-schedule is not for exported steps"),
    (["--size", "base"], "holds size tiny of mahjong, not --size base"),
    (["--noise-scale-micro-batches", "4"], "has a step in 2 slices at batch size 32"),
    (["--max-batch-per-device", "16"], "--max-batch-per-device is not for exported steps"),
    (["--global-batch-min", "32"], "--global-batch-min/--global-batch-max is not for exported steps"),
    (["--global-batch-max", "64"], "--global-batch-min/--global-batch-max is not for exported steps"),
    (["--critical-batch", "no-such-file.jsonl"], "--critical-batch is not for exported steps"),
    (["--bad-samples", "skip"], "--bad-samples is not for exported steps"),
    (["--threads", "2"], "--threads is not for exported steps"),
    (["--num-workers", "0"], "--num-workers is not for exported steps"),
])
def test_what_an_exported_step_cannot_do_is_one_line(exported: Path, selfplay_data: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str], flags: list[str],
                                                     says: str) -> None:
    if "--threads" in flags and machine_cpus() < 2:
        pytest.skip("--threads takes at most this machine's one CPU, the default")
    command = ["train", "--exported", str(exported), "--data", str(selfplay_data), "--batch-size-per-device",
               str(BATCH), "--steps", "4", "--no-progress", "--out", str(tmp_path / "run"), *flags]
    assert main(command) != 0
    error = capsys.readouterr().err
    assert says in error and len(error.strip().splitlines()) == 1, error
    assert not (tmp_path / "run").exists()


def test_data_without_the_steps_columns_is_refused_before_anything_is_written(
        exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "points.npz"
    np.savez(data, x=np.zeros((64, 3), np.float32), y=np.zeros(64, np.int64))
    assert main(["data", "from-arrays", str(data), "--out", str(tmp_path / "points")]) == 0
    assert main(["train", "--exported", str(exported), "--data", str(tmp_path / "points"),
                 "--batch-size-per-device", str(BATCH), "--steps", "4", "--out", str(tmp_path / "run")]) != 0
    assert "has no column 'features'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_slices_that_do_not_cut_every_batch_size_evenly_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--workload", "mahjong", "--size", "tiny", "--platform", "cpu", "--batch-sizes", "30,32",
                 "--noise-scale-micro-batches", "4", "--out", str(tmp_path / "out")]) != 0
    error = capsys.readouterr().err
    assert "must divide every batch size; 30 do not" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_resume_on_data_written_again_in_the_same_folder_is_refused_as_the_torch_trainer_refuses_it(
        exported: Path, selfplay_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run records the fingerprint its torch counterpart records (the same `data_read.json`), and
    a resume whose --data now holds other shards is one line, the run folder as it was."""
    import shutil

    from child_commands import run_ok

    data, run = tmp_path / "data", tmp_path / "run"
    shutil.copytree(selfplay_data, data)
    flags = ["--exported", str(exported), "--data", str(data), "--batch-size-per-device", str(BATCH),
             "--checkpoint-every", "5", "--eval-every", "0", "--no-progress", "--out", str(run)]
    assert main(["train", *flags, "--steps", "5"]) == 0
    shutil.rmtree(data)
    run_ok("data", "mahjong-selfplay", "--games", "3", "--workers", "1", "--out", str(data), "--seed", "1",
           "--no-progress", timeout=120)
    before = {str(path.relative_to(run)): path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()}
    capsys.readouterr()
    assert main(["train", *flags, "--steps", "10", "--resume"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"train: cannot resume {run}: --data {data} is not the data it trained on" in line
    assert {str(path.relative_to(run)): path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file()} == before
