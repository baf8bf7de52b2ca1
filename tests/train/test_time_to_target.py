"""Time to a quality target: `--until` records the first validation that meets it (bracketed by the
one before), `--stop-at-target` stops there, validation can be scheduled in samples, a run killed
with kill -9 and resumed counts the time before the kill, and a goal the workload cannot measure is
one line before training."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from child_commands import start_child, trainspeed_argv
from train_runs import TINY_RUN

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.train.time_to_target import QualityGoal, parse_goal

REACHABLE = "val/loss<=100"
"""Met by the first validation of any run: where the crossing lands is then known in advance."""
UNREACHABLE = "val/accuracy>=1.01"


def _rows(run_dir: Path, kind: str) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row["kind"] == kind]


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.mark.parametrize(("text", "goal"), [
    ("val/accuracy>=0.95", QualityGoal("accuracy", ">=", 0.95)),
    ("loss <= 0.3", QualityGoal("loss", "<=", 0.3)),
    ("val/bits_per_char<=2", QualityGoal("bits_per_char", "<=", 2.0)),
])
def test_a_goal_is_a_metric_a_direction_and_a_threshold(text: str, goal: QualityGoal) -> None:
    assert parse_goal(text) == goal
    assert goal.is_met(goal.threshold)


@pytest.mark.parametrize("text", ["val/accuracy>0.9", "accuracy", "val/loss<=nan", "val/loss<=inf", ">=3"])
def test_a_goal_without_a_metric_a_comparison_or_a_finite_threshold_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--until"):
        parse_goal(text)


@pytest.mark.e2e
def test_a_one_rank_run_records_the_first_validation_that_meets_the_goal_and_the_one_before(tmp_path, data_args) -> None:
    """Accuracy is checked every 64 samples (4 steps of 16): the row of the first validation at or
    above the run's own 3rd validation value is the crossing, and the validation before it brackets it."""
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, *data_args, "--batch-size-per-device", "16", "--steps", "16",
                 "--eval-every-samples", "64", "--eval-batches", "2", "--num-workers", "0", "--out", str(out),
                 "--until", UNREACHABLE]) == 0
    accuracies = [row["accuracy"] for row in _rows(out, "val")]
    assert [row["step"] for row in _rows(out, "val")] == [4, 8, 12, 16]
    missed = _rows(out, "time-to-target")[-1]
    assert missed["reached"] is False and missed["best_value"] == max(accuracies)
    assert "not reached within 256 samples" in _summary_line(out)

    goal = min(accuracies[1:])  # met at the latest by the second validation that scores it
    crossing = next(index for index, value in enumerate(accuracies) if value >= goal)
    again = tmp_path / "again"
    assert main(["train", *TINY_RUN, *data_args, "--batch-size-per-device", "16", "--steps", "16",
                 "--eval-every-samples", "64", "--eval-batches", "2", "--num-workers", "0", "--out", str(again),
                 "--until", f"val/accuracy>={goal!r}"]) == 0
    (row,) = _rows(again, "time-to-target")
    assert row["reached"] and row["step"] == 4 * (crossing + 1) and row["samples"] == 64 * (crossing + 1)
    assert row["value"] == accuracies[crossing]
    if crossing > 0:
        assert (row["previous_step"], row["previous_value"]) == (4 * crossing, accuracies[crossing - 1])
        assert row["previous_train_s"] < row["train_s"]
    assert 0 < row["train_s"] <= row["wall_s"]
    assert row["resumes"] == 0 and row["global_batch"] == 16
    assert _summary(again)["time_to_target"] == {key: value for key, value in row.items()
                                                 if key not in ("kind", "schema_version")}


def _summary_line(run_dir: Path) -> str:
    from trainspeed.train.runs import read_run_summary

    summary = read_run_summary(run_dir)
    assert summary.time_to_target is not None
    return summary.time_to_target.line()


@pytest.mark.e2e
def test_two_ranks_stop_at_the_target_with_a_checkpoint(tmp_path, data_args, capsys) -> None:
    """The command in this process, its agent and two ranks its children: the ranks are what is tested."""
    out = tmp_path / "run"
    code = main(["train", *TINY_RUN, *data_args, "--nproc", "2", "--batch-size-per-device", "16", "--steps", "40",
                 "--eval-every-samples", "128", "--eval-batches", "1", "--out", str(out),
                 "--until", REACHABLE, "--stop-at-target"])
    assert code == 0, capsys.readouterr().err[-2000:]
    (row,) = _rows(out, "time-to-target")
    assert row["reached"] and row["step"] == 4 and row["samples"] == 128 and row["world_size"] == 2
    assert row["previous_step"] is None  # the first validation met it
    summary = _summary(out)
    assert summary["last_step"] == 4 and summary["time_to_target"]["reached"]
    assert (out / "checkpoints" / "step-000000004.pt").is_file()
    assert [row["step"] for row in _rows(out, "val")] == [4]
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    html = page.read_text()
    assert 'id="table-time-to-target"' in html and 'id="fig-noise-scale"' in html and "val/loss&lt;=100" in html


@pytest.mark.e2e
def test_a_run_killed_with_kill_9_and_resumed_counts_the_time_before_the_kill(tmp_path, data_args) -> None:
    """Checkpoints every 4 steps, validation first at step 60: the kill comes after a checkpoint and
    before the goal, so the resumed invocation reaches it, with the killed one's seconds counted."""
    out = tmp_path / "run"
    flags = [*TINY_RUN, *data_args, "--batch-size-per-device", "16", "--steps", "200", "--eval-every-samples", "960",
             "--eval-batches", "1", "--checkpoint-every", "4", "--num-workers", "0", "--out", str(out),
             "--until", REACHABLE, "--stop-at-target"]
    process = start_child(trainspeed_argv("train", *flags))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not _logged_past_a_checkpoint(out):
            time.sleep(0.05)
        assert _logged_past_a_checkpoint(out), "the run logged no window after a checkpoint"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    killed = _rows(out, "train")
    assert not _rows(out, "time-to-target"), "the killed run reached the goal before the kill"
    logged_train_s = killed[-1]["run_train_s"]

    assert main(["train", *flags, "--resume"]) == 0
    (row,) = _rows(out, "time-to-target")
    assert row["reached"] and row["step"] == 60 and row["resumes"] == 1
    # The time before the kill is in the total, the part after the checkpoint (redone) counted as lost.
    assert row["train_s"] > logged_train_s
    assert row["lost_train_s"] >= 0 and row["train_s"] > row["lost_train_s"]
    assert _summary(out)["time_to_target"]["resumes"] == 1


def _logged_past_a_checkpoint(out: Path) -> bool:
    """A window logged at or past the newest checkpoint: a state the run stays in once it reaches
    it (a window past the checkpoint, before the next checkpoint is taken, lasts a step or two,
    which a poll on a loaded machine can miss every time until the run ends)."""
    metrics, checkpoints = out / "metrics.jsonl", out / "checkpoints"
    if not metrics.is_file() or not list(checkpoints.glob("step-*.pt")):
        return False
    newest = max(int(path.stem.split("-")[1]) for path in checkpoints.glob("step-*.pt"))
    steps = [json.loads(line).get("step", 0) for line in metrics.read_text().splitlines() if line.endswith("}")]
    return newest >= 4 and max(steps, default=0) >= newest


@pytest.mark.e2e
@pytest.mark.parametrize(("workload", "goal", "said"), [
    (["--workload", "mahjong", "--size", "tiny"], "val/bleu>=0.5",
     "workload 'mahjong' has no validation metric 'bleu' (its metrics: val/loss, val/accuracy"),
    (["--workload", "stylegan3", "--size", "tiny-t"], "val/loss<=1", "has no validation metrics"),
])
def test_a_goal_the_workload_does_not_measure_is_one_line_before_training(tmp_path, cli_error, selfplay_data,
                                                                          workload, goal, said) -> None:
    message = cli_error("train", *workload, "--data", str(selfplay_data), "--steps", "2", "--until", goal,
                        "--out", str(tmp_path / "run"))
    assert said in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("flags", "said"), [
    (["--synthetic-data", "--until", "val/loss<=1"], "--synthetic-data has none"),
    (["--synthetic-data", "--stop-at-target"], "give --until too"),
    (["--synthetic-data", "--eval-every", "2", "--eval-every-samples", "64"], "not both"),
    (["--synthetic-data", "--until", "val/loss=1"], "write METRIC>=VALUE or METRIC<=VALUE"),
])
def test_inconsistent_goal_flags_are_one_line(tmp_path, cli_error, flags, said) -> None:
    message = cli_error("train", *TINY_RUN, "--steps", "2", "--out", str(tmp_path / "run"), *flags)
    assert said in message


def test_a_checkpoints_clock_is_read_as_numbers_and_an_older_checkpoint_without_one_starts_at_zero() -> None:
    from trainspeed.train.time_to_target import RunTotals

    assert RunTotals.from_state({"train_s": 1.5, "resumes": 2, "unknown": "kept out"}) == RunTotals(train_s=1.5, resumes=2)
    assert RunTotals.from_state(None) == RunTotals()
    with pytest.raises(TypeError, match="train_s as str"):
        RunTotals.from_state({"train_s": "1.5"})


def test_the_crossing_keeps_the_resumes_and_lost_seconds_of_its_own_time_through_a_checkpoint() -> None:
    from trainspeed.train.rows import EvalRecord
    from trainspeed.train.time_to_target import RunTotals, TargetTracker

    tracker = TargetTracker(parse_goal("val/accuracy>=0.5"), "val/accuracy>=0.5")
    assert not tracker.observe(EvalRecord(step=4, metrics={"accuracy": 0.3}), 64, 1.0, 1.2)
    assert tracker.observe(EvalRecord(step=8, metrics={"accuracy": 0.6}), 128, 2.0, 2.5)
    fields = dict(step=8, samples=128, global_batch=16, world_size=1, target="cpu:eager:fp32")
    first = tracker.record(RunTotals(train_s=2.0, wall_s=2.5), **fields)
    assert (first.step, first.value, first.previous_step, first.previous_value) == (8, 0.6, 4, 0.3)
    resumed = TargetTracker(parse_goal("val/accuracy>=0.5"), "val/accuracy>=0.5")
    resumed.load_state(tracker.as_state())
    later = resumed.record(RunTotals(train_s=9.0, resumes=1, lost_train_s=0.4), **{**fields, "step": 20})
    assert later == first
