"""`trainspeed plan` and `trainspeed study time-to-target` refuse bad input in one line, before anything runs."""

from pathlib import Path


def test_a_check_needs_somewhere_to_write(cli_error, tmp_path: Path):
    rows = tmp_path / "bench.jsonl"
    rows.write_text("")
    assert "--check needs --out" in cli_error("plan", str(rows), "--check", "best")


def test_a_missing_input_is_named(cli_error, tmp_path: Path):
    assert "no such file or directory" in cli_error("plan", str(tmp_path / "missing.jsonl"))


def test_the_plan_does_not_append_to_its_own_input(cli_error, tmp_path: Path):
    rows = tmp_path / "bench.jsonl"
    rows.write_text("")
    assert "is one of the inputs" in cli_error("plan", str(rows), "--out", str(rows))


def test_the_study_needs_data_and_a_goal(cli_error, tmp_path: Path):
    assert "give --data" in cli_error("study", "time-to-target", "--out", str(tmp_path / "out"))


def test_the_study_refuses_a_goal_the_workload_does_not_measure(cli_error, tmp_path: Path):
    error = cli_error("study", "time-to-target", "--out", str(tmp_path / "out"), "--data", str(tmp_path),
                      "--until", "val/bleu>=30")
    assert "has no validation metric 'bleu'" in error


def test_the_study_refuses_validation_samples_that_differ_between_batches(cli_error, tmp_path: Path):
    error = cli_error("study", "time-to-target", "--out", str(tmp_path / "out"), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5", "--global-batches", "64,96", "--val-samples", "128")
    assert "--val-samples 128 must be a multiple of batch 96" in error
