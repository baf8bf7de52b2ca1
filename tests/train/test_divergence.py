"""A run whose loss turns NaN (a learning rate far too large) is a result: it stops at the first
logged window, checkpoint or validation after the step, records that step in its summary, writes
no number its readers refuse, checkpoints and validates none of the diverged weights, and exits 0.
The report shows it beside a healthy run, marked; a plan over it and a run that met the goal plans;
its goal counts as not reached."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from train_runs import TINY_RUN

from trainspeed.cli import main
from trainspeed.train.checkpoint import step_files
from trainspeed.train.runs import read_run

DIVERGING = ["--lr", "100", "--lr-scaling", "none"]
"""Mahjong tiny's loss is NaN from its third step at this learning rate."""
SYNTHETIC = [*TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "12"]
REACHABLE = "val/loss<=100"
"""Met by the first validation of a healthy run."""


def _train(out: Path, *flags: str) -> int:
    return main(["train", *flags, "--out", str(out)])


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("healthy") / "run"
    assert _train(out, *SYNTHETIC, "--log-every", "4") == 0
    return out


@pytest.fixture(scope="module")
def diverging(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The synthetic run at DIVERGING's learning rate, logged every 4 steps, and what it printed:
    the run that the tests of its folder and of its report read."""
    out = tmp_path_factory.mktemp("diverging") / "run"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert _train(out, *SYNTHETIC, *DIVERGING, "--log-every", "4") == 0
    return out, printed.getvalue()


def test_a_diverging_run_stops_at_its_first_non_finite_loss_and_its_folder_reads(diverging: tuple[Path, str]) -> None:
    out, printed = diverging
    run = read_run(out)  # every row of it reads: no NaN where a number belongs
    summary = run.summary
    assert summary.diverged and 1 <= summary.diverged_at_step <= summary.last_step == 4 < 12
    assert math.isnan(summary.final_loss) and summary.validation is None
    assert (f"diverged: the training loss was not finite at step {summary.diverged_at_step}; the run stopped at "
            "step 4") in printed
    assert [row.step for row in run.train_curve] == [4] and math.isnan(run.train_curve[0].loss)
    assert all(math.isfinite(record.grad_sq_avg) for record in run.noise_curve)
    assert step_files(out) == []  # the diverged weights are no state to continue from
    assert json.loads((out / "summary.json").read_text())["diverged_at_step"] == summary.diverged_at_step


def test_a_run_that_diverges_between_its_logged_windows_checkpoints_none_of_the_diverged_weights(tmp_path: Path) -> None:
    """Logged every 8 steps, checkpointed every step: the losses are read before each checkpoint,
    so the last checkpoint is of the step before the first NaN loss, and the steps after it are
    the train row of a window cut short."""
    out = tmp_path / "run"
    assert _train(out, *SYNTHETIC, *DIVERGING, "--log-every", "8", "--checkpoint-every", "1",
                  "--keep-checkpoints", "0") == 0
    run = read_run(out)
    diverged = run.summary.diverged_at_step
    assert diverged is not None and run.summary.last_step == diverged < 8
    assert [step for step, _ in step_files(out)] == list(range(diverged - 1, 0, -1))
    assert [row.step for row in run.train_curve] == [diverged] and math.isnan(run.train_curve[0].loss)


def test_a_healthy_run_records_no_divergence(healthy: Path) -> None:
    summary = read_run(healthy).summary
    assert not summary.diverged and summary.diverged_at_step is None and summary.last_step == 12


def test_the_report_shows_a_diverged_run_beside_a_healthy_one_marked(
        tmp_path: Path, healthy: Path, diverging: tuple[Path, str]) -> None:
    diverged, _ = diverging
    step = read_run(diverged).summary.diverged_at_step
    page = tmp_path / "report.html"
    assert main(["report", str(diverged), str(healthy), "--out", str(page)]) == 0
    html = page.read_text()
    table = html[html.index('id="table-training"'):]
    assert f"at step {step} (loss not finite)" in table and str(diverged / "summary.json") in table
    assert str(healthy / "summary.json") in table
    assert main(["plot", str(diverged)]) == 0  # run.png and run.svg beside the run folder


@pytest.mark.e2e
def test_a_plan_over_a_diverged_run_and_one_that_met_the_goal_plans(tmp_path: Path, selfplay_data: Path,
                                                                    capsys) -> None:
    """The diverged run's goal is not reached; the other run's steps to it make the plan."""
    goal = ["--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data), "--threads", "1", "--no-progress",
            "--batch-size-per-device", "16", "--steps", "24", "--log-every", "4", "--eval-every", "4",
            "--eval-batches", "2", "--until", REACHABLE, "--noise-scale-micro-batches", "2", "--noise-scale-every", "1"]
    assert _train(tmp_path / "diverged", *goal, *DIVERGING) == 0
    assert _train(tmp_path / "met", *goal) == 0
    diverged = read_run(tmp_path / "diverged").summary
    assert diverged.diverged and diverged.time_to_target is not None and not diverged.time_to_target.reached
    bench = tmp_path / "bench.jsonl"
    assert main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32", "--batch-sizes",
                 "16", "--threads", "1", "--windows", "2", "--min-window-s", "0.05", "--warmup-steps", "1",
                 "--peak-tflops", "1000", "--no-progress", "--no-plot", "--out", str(bench)]) == 0
    capsys.readouterr()
    plan = tmp_path / "plan.jsonl"
    assert main(["plan", str(bench), str(tmp_path / "diverged"), str(tmp_path / "met"), "--out", str(plan)]) == 0, \
        capsys.readouterr().err
    assert any(json.loads(line)["kind"] == "plan" for line in plan.read_text().splitlines())
    page = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "diverged"), str(tmp_path / "met"), "--out", str(page)]) == 0
    assert f"no (diverged at step {diverged.diverged_at_step})" in page.read_text()


@pytest.mark.e2e
def test_two_ranks_stop_together_at_the_first_non_finite_loss(tmp_path: Path, capsys) -> None:
    """The ranks agree on the step (the earliest of any rank's) and stop at the same window."""
    out = tmp_path / "run"
    assert _train(out, *SYNTHETIC, *DIVERGING, "--nproc", "2", "--log-every", "4") == 0, capsys.readouterr().err[-2000:]
    summary = read_run(out).summary
    assert summary.world_size == 2 and summary.diverged and summary.last_step == 4
    assert step_files(out) == []
