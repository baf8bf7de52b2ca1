"""`trainspeed plan` and `trainspeed study time-to-target` refuse bad input in one line, before anything runs:
among it a file to write that is no file of their own rows, or no regular file at all."""

import json
import os
import shutil
from pathlib import Path

import pytest


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


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
PLAN_INPUTS = (str(RESULTS / "plan_bench_mahjong.jsonl"), str(RESULTS / "time_to_target_study_mahjong.jsonl"))
"""Committed bench rows and a committed study's fit: enough for a plan that runs in a second."""


def refused_before_planning(capsys, *argv: str) -> str:
    """`trainspeed ARGV...` in-process: exit 2 with one error line, and no plan printed (nothing ran)."""
    from trainspeed.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: "), (code, lines)
    assert captured.out == "", captured.out
    return lines[0]


def test_the_plan_runs_on_the_committed_inputs(capsys, tmp_path: Path):
    """The inputs of the refusals below plan as they are: a refusal is the --out's doing."""
    from trainspeed.cli import main

    out = tmp_path / "plan.jsonl"
    assert main(["plan", *PLAN_INPUTS, "--out", str(out)]) == 0
    assert main(["plan", *PLAN_INPUTS, "--out", str(out)]) == 0  # a file of plan rows takes more of them
    assert "recommended:" in capsys.readouterr().out
    assert {json.loads(line)["kind"] for line in out.read_text().splitlines()} == {"plan"}


@pytest.mark.parametrize("rows, kind", [
    (RESULTS / "charlm_cpu" / "metrics.jsonl", "train"),
    (RESULTS / "plan_bench_charlm.jsonl", "bench"),
], ids=["a-run's-metrics", "another-command's-bench-file"])
def test_the_plan_appends_only_to_a_file_of_plan_rows(capsys, tmp_path: Path, rows: Path, kind: str):
    """A run's metrics.jsonl or a bench file given a plan's rows would be refused by its own readers
    (`report RUN`, `plan RUN`, `bench --out`) ever after: the plan refuses it instead, untouched."""
    out = tmp_path / rows.name
    shutil.copyfile(rows, out)
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", str(out))
    assert f"--out {out}: line 1 is a {kind!r} row, not a 'plan' or 'plan-check' row" in line, line
    assert out.read_bytes() == rows.read_bytes()


def test_an_out_that_is_a_fifo_is_refused_before_the_plan_runs(capsys, tmp_path: Path):
    fifo = tmp_path / "plan.jsonl"
    os.mkfifo(fifo)
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", str(fifo))
    assert f"--out {fifo}: is a FIFO (named pipe), not a regular file" in line, line


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("device", ["/dev/full", "/dev/zero"])
def test_an_out_that_is_a_device_is_refused_before_the_plan_runs(capsys, device: str):
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", device)
    assert f"--out {device}: is a character device, not a regular file" in line, line


def test_the_study_appends_its_rows_only_to_a_file_of_its_own_kinds(cli_error, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    rows = out / "time_to_target.jsonl"
    shutil.copyfile(RESULTS / "plan_bench_charlm.jsonl", rows)
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(out), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5")
    assert f"study time-to-target: {rows}: line 1 is a 'bench' row, not a 'time-to-target-study-config' or" in error
    assert rows.read_bytes() == (RESULTS / "plan_bench_charlm.jsonl").read_bytes()
    assert sorted(path.name for path in out.iterdir()) == ["time_to_target.jsonl"]


def test_the_studies_record_goes_only_to_a_file_of_study_records(cli_error, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "studies.jsonl").write_text('{"kind": "plan", "schema_version": 1}\n')
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(out), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5")
    assert f"{out / 'studies.jsonl'}: line 1 is a 'plan' row, not a 'study' row" in error
    assert (out / "studies.jsonl").read_text() == '{"kind": "plan", "schema_version": 1}\n'


@pytest.mark.parametrize("make", [
    lambda path: path.write_text("my notes on batch 16\n"),
    lambda path: path.write_text('{"note": "mine"}\n'),
    lambda path: os.mkfifo(path),
    lambda path: path.mkdir(),
], ids=["text", "json-of-another-shape", "fifo", "folder"])
def test_the_study_refuses_a_users_file_named_like_a_runs_record(cli_error, tmp_path: Path, make):
    """The study writes `RUNS/b16-lr1-s0.command.json` beside run b16-lr1-s0: a file of the user's
    by that name is refused before anything trains, never written over or renamed."""
    runs = tmp_path / "runs"
    runs.mkdir()
    record = runs / "b16-lr1-s0.command.json"
    make(record)
    before = record.read_bytes() if record.is_file() else None
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(tmp_path / "out"),
                      "--runs-dir", str(runs), "--data", str(tmp_path), "--until", "val/accuracy>=0.5")
    assert f"time-to-target study: {record} is named like the record of one of its runs but " in error, error
    assert "it is never written over: move it away or give another --runs-dir" in error
    assert [path.name for path in runs.iterdir()] == [record.name]
    assert before is None or record.read_bytes() == before
