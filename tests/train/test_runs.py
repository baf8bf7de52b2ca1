"""A run directory as read (`trainspeed.train.runs`): its summary and every metrics row by the
dataclass of its kind, the queries the studies and the plan ask of it, the reading a resume makes
of a killed run's rows, and bad input as one line naming the file and the line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.train.rows import EvalRecord, RunSummary, TimeToTargetRecord, WindowRecord
from trainspeed.train.runs import (
    METRICS_KINDS,
    METRICS_ROWS,
    LoggedSeconds,
    has_summary,
    is_run_directory,
    logged_seconds,
    metrics_lines,
    parse_metrics_row,
    read_run,
    read_run_summary,
    read_summary_file,
)

REPO = Path(__file__).resolve().parents[2]
ONE_RANK = REPO / "docs" / "results" / "time_to_target_one_rank"
"""A committed `trainspeed train --until val/accuracy>=0.85` run: train, val, noise-scale and
time-to-target rows, and its summary."""


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(ONE_RANK, run)
    return run


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _write_metrics(run: Path, rows: list[dict], tail: str = "") -> None:
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + tail)


def _error(call, *args) -> str:
    with pytest.raises(UsageError) as caught:
        call(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_run_is_read_with_every_metrics_row_as_its_kinds_dataclass() -> None:
    run = read_run(ONE_RANK)
    rows = _metrics(ONE_RANK)
    assert isinstance(run.summary, RunSummary) and run.summary.global_batch == 64
    assert len(run.metrics) == len(rows)
    assert [type(row).KIND for row in run.metrics] == [row["kind"] for row in rows]
    assert len(run.train_curve) == 40 and all(isinstance(row, WindowRecord) for row in run.train_curve)
    assert [record.step for record in run.val_curve] == [128, 256, 384, 512, 640]
    assert len(run.noise_curve) == 40 and run.noise_curve[0].network == "policy"
    (reached,) = run.rows_of(TimeToTargetRecord)
    assert run.time_to_target == reached and reached.reached and reached.step == 640
    assert run.files == (ONE_RANK / "summary.json", ONE_RANK / "metrics.jsonl")
    assert run.label.endswith(": cpu:eager:fp32 x1, 64/device")


def test_the_validations_and_the_noise_scale_up_to_a_step() -> None:
    run = read_run(ONE_RANK)
    assert sorted(run.validations()) == [128, 256, 384, 512, 640]
    assert sorted(run.validations(until_step=512)) == [128, 256, 384, 512]
    assert run.validations()[640].metrics["accuracy"] == pytest.approx(0.8515625)
    near = run.noise_scale_at(640)
    assert near is not None and near.step == 640 and near is [r for r in run.noise_curve if r.step <= 640][-1]
    assert run.noise_scale_at(200).step == 192
    assert run.noise_scale_at(15) is None


def test_the_noise_scale_at_a_step_is_the_first_networks_by_name(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    rows = _metrics(run)
    noise = [row for row in rows if row["kind"] == NoiseScaleRecord.KIND][:3]
    generator = [{**row, "network": "G", "b_simple_avg": 7.0} for row in noise]
    discriminator = [{**row, "network": "D", "b_simple_avg": 3.0} for row in noise]
    _write_metrics(run, generator + discriminator)
    near = read_run(run).noise_scale_at(noise[1]["step"])
    assert near is not None and (near.network, near.step, near.b_simple_avg) == ("D", noise[1]["step"], 3.0)


def test_a_run_without_metrics_rows_reads_its_summary_alone(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    (run / "metrics.jsonl").unlink()
    read = read_run(run)
    assert read.metrics == () and read.val_curve == [] and read.noise_scale_at(10**9) is None
    assert read.files == (run / "summary.json",)
    assert read_run_summary(run) == read.summary == read_summary_file(run / "summary.json")


def test_a_run_that_never_finished_a_step_and_a_folder_without_a_run_are_one_line(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    (started / "train_config.json").write_text("{}\n")
    assert is_run_directory(started) and not has_summary(started)
    for call in (read_run, read_run_summary):
        assert _error(call, started) == (
            f"{started}: a run directory without rows yet (its training wrote no summary.json: it failed or was "
            "stopped before it finished a step); see its logs, or train it first")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not is_run_directory(empty)
    assert _error(read_run, empty) == f"{empty / 'summary.json'}: no such file"


def test_a_summary_that_is_not_one_run_summary_is_one_line(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    (run / "summary.json").write_text('{"kind": "train-summary", "schema_version": 1}\n{}\n')
    assert _error(read_run, run) == f"{run / 'summary.json'}: not a run summary (one JSON object)"
    (run / "summary.json").write_text('{"kind": "val", "schema_version": 1, "step": 3}\n')
    assert _error(read_run, run) == f"{run / 'summary.json'}:1: a 'val' row where a 'train-summary' row belongs"


@pytest.mark.parametrize("row, said", [
    ({"kind": "bench", "schema_version": 1},
     "a 'bench' row is no metrics row (train, val, noise-scale, time-to-target, batch-switch, train-summary)"),
    ({"kind": "val", "schema_version": 1, "step": 4, "loss": "low"}, "val row: metric loss must be a number"),
    ({"kind": "train", "schema_version": 1, "step": 4}, "train row without its field"),
    ([1, 2], "not a JSON object but list"),
], ids=["another-kind", "bad-metric", "missing-field", "not-an-object"])
def test_a_bad_metrics_row_is_one_line_naming_the_file_and_line(tmp_path: Path, row, said: str) -> None:
    run = _copy(tmp_path)
    rows = _metrics(run)
    _write_metrics(run, rows[:2] + [row] + rows[2:])
    assert _error(read_run, run).startswith(f"{run / 'metrics.jsonl'}:3: {said}")


def test_a_torn_metrics_line_is_refused_by_the_reader(tmp_path: Path) -> None:
    """Only a resume passes over a line a kill tore (it drops it); a run read for a report or a
    study is whole, or one line says where it is not."""
    run = _copy(tmp_path)
    _write_metrics(run, _metrics(run), tail='{"kind": "train", "st')
    assert _error(read_run, run).startswith(f"{run / 'metrics.jsonl'}:{len(_metrics(ONE_RANK)) + 1}: not a trainspeed "
                                            "result row (not JSON")


def test_every_metrics_kind_has_one_dataclass() -> None:
    assert set(METRICS_KINDS) == {"train", "val", "noise-scale", "time-to-target", "batch-switch", "train-summary"}
    assert all(METRICS_KINDS[row_type.KIND] is row_type for row_type in METRICS_ROWS)
    source = "metrics.jsonl:1"
    record = parse_metrics_row({"kind": "val", "schema_version": 1, "step": 3, "loss": 2}, source)
    assert record == EvalRecord(step=3, metrics={"loss": 2.0})


def test_a_killed_runs_lines_are_read_whole_or_torn(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert metrics_lines(run) == [] and logged_seconds(run) == LoggedSeconds()
    (run / "metrics.jsonl").write_bytes(
        b'{"kind": "train", "step": 4, "run_train_s": 2.5, "run_wall_s": 3.0}\n'
        b'{"kind": "val", "step": 4, "loss": 1.0}\n'
        b'{"kind": "train-summary", "last_step": 5}\n'
        b'{"kind": "note"}\n'
        b'\n'
        b'{"kind": "train", "step": 6, "run_train_s": 4.0, "run_wall_s": NaN}\n'
        b'\xff\xfe not UTF-8\n'
        b'{"kind": "train", "step": 7, "run_train_s": 9')
    lines = metrics_lines(run)
    assert [line.step for line in lines] == [4, 4, 5, float("-inf"), float("inf"), 6, float("inf"), float("inf")]
    assert lines[0].text == b'{"kind": "train", "step": 4, "run_train_s": 2.5, "run_wall_s": 3.0}'
    assert [line.row is None for line in lines] == [False] * 4 + [True, False, True, True]
    assert logged_seconds(run) == LoggedSeconds(train_s=4.0, wall_s=3.0)


def test_a_batch_switch_row_is_of_the_step_it_was_written_after_not_of_its_switch(tmp_path: Path) -> None:
    """A switch at step 5 whose new batch settled through step 7 is written after step 7: a kill
    after that and a resume from the checkpoint of step 6 must drop it (the checkpoint carries the
    switch, and the resumed run writes it again), or the run has the switch twice."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(
        b'{"kind": "batch-switch", "step": 5, "last_step": 7, "to_global_batch": 16}\n'
        b'{"kind": "batch-switch", "step": 9, "to_global_batch": 32}\n'
        b'{"kind": "batch-switch", "step": 11, "last_step": null, "to_global_batch": 64}\n')
    assert [line.step for line in metrics_lines(run)] == [7, 9, 11]



def test_a_run_that_logged_its_steps_twice_is_one_line_naming_both_rows(tmp_path: Path, cli_error) -> None:
    """As a run started over on its own rows leaves them: every reader (the report, the plan, the
    studies) would count those windows' seconds and samples twice."""
    run = _copy(tmp_path)
    rows = _metrics(run)
    train = [row for row in rows if row["kind"] == "train"]
    _write_metrics(run, train[:2] + rows)
    message = _error(read_run, run)
    first, second = train[0]["step"], train[1]["step"]
    assert f"metrics.jsonl:3: a training window of step {first} after one of step {second} (" in message
    assert "the run logged its steps twice" in message
    error = cli_error("report", str(run), "--out", str(tmp_path / "report.html"))
    assert "the run logged its steps twice" in error
    assert not (tmp_path / "report.html").exists()
