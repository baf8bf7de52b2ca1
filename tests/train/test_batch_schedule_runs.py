"""`trainspeed train --batch-schedule`: runs of the whole trainer with a batch that grows (explicit
and auto), their rows, summary, report and learning rates; bad input, refused in one line before
anything runs; a run that is killed with kill -9 and resumed ends with the parameters of an
uninterrupted one; XLA (SPMD over two devices) compiles each shape once.
The schedule's parts on their own are tested in test_batch_schedule.py."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from child_commands import TESTS, start_child
from toy_workload import write_toy_data
from train_runs import TINY_RUN, all_networks, run_train, train_command, train_env

from trainspeed.cli import main
from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.rows import Source, parse_row
from trainspeed.targets import available_targets
from trainspeed.train.batch_schedule import noise_reading, run_seconds_at

TOY = ["--workload", "toy_workload:ToyWorkload", "--no-progress", "--threads", "1", "--num-workers", "0",
       "--log-every", "2", "--lr", "0.05"]


def _rows(run_dir: Path, kind: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if kind is None or row["kind"] == kind]


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_toy_data(tmp_path_factory.mktemp("toy") / "data", samples=2048)


def test_an_explicit_schedule_switches_at_its_samples_with_the_lr_of_the_rule_and_micro_batches_past_the_cap(
        tmp_path: Path, toy_data: Path) -> None:
    out = tmp_path / "run"
    assert main(["train", *TOY, "--data", str(toy_data), "--batch-schedule", "16@0,32@64,128@192",
                 "--max-batch-per-device", "32", "--samples", "1000", "--warmup-steps", "1", "--lr-scaling", "linear",
                 "--timing-warmup-steps", "1", "--out", str(out)]) == 0
    switches = _rows(out, "batch-switch")
    assert [(row["step"], row["samples"], row["from_global_batch"], row["to_global_batch"],
             row["batch_size_per_device"], row["micro_batches"], row["reason"]) for row in switches] == \
        [(5, 64, 16, 32, 32, 1, "schedule"), (9, 192, 32, 128, 128, 4, "schedule")]
    for row in switches:  # past the warm-up the cosine does not move at a switch: the rule alone changes the LR
        assert row["lr_scaling"] == "linear"
        assert row["lr_after"] / row["lr_before"] == pytest.approx(row["to_global_batch"] / row["from_global_batch"])
    windows = _rows(out, "train")
    assert [(row["step"], row["samples"], row["global_batch"], row["holds_switch"]) for row in windows] == \
        [(2, 32, 16, False), (4, 64, 16, False), (6, 128, 32, True), (8, 192, 32, False), (10, 448, 128, True),
         (12, 704, 128, False), (14, 960, 128, False), (15, 1088, 128, False)]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["last_step"], summary["samples"], summary["global_batch"]) == (15, 1088, 128)
    schedule = summary["batch_schedule"]
    assert (schedule["schedule"], schedule["start_global_batch"], schedule["final_global_batch"]) == \
        ("16@0,32@64,128@192", 16, 128)
    assert [(entry["samples"], entry["to_global_batch"]) for entry in schedule["switches"]] == [(64, 32), (192, 128)]
    assert summary["learning_rates"]["warmup_samples"] == 16


def test_a_schedule_that_never_switches_trains_the_parameters_of_the_fixed_batch(tmp_path: Path, toy_data: Path) -> None:
    common = [*TOY, "--data", str(toy_data), "--steps", "9"]
    assert main(["train", *common, "--batch-size-per-device", "32", "--out", str(tmp_path / "fixed")]) == 0
    assert main(["train", *common, "--batch-schedule", "32@0", "--out", str(tmp_path / "schedule")]) == 0
    fixed, schedule = all_networks(tmp_path / "fixed"), all_networks(tmp_path / "schedule")
    assert all(torch.equal(fixed[name], schedule[name]) for name in fixed)


def test_the_report_draws_the_global_batch_against_samples_beside_the_loss_and_b_simple(
        tmp_path: Path, toy_data: Path) -> None:
    out = tmp_path / "run"
    assert main(["train", *TOY, "--data", str(toy_data), "--batch-schedule", "16@0,64@64", "--steps", "6",
                 "--out", str(out)]) == 0
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    html = page.read_text()
    assert 'id="fig-batch-schedule"' in html and "Global batch against samples" in html
    assert 'id="table-batch-switches"' in html


def test_auto_grows_from_its_min_while_the_noise_scale_allows_and_records_each_reading(tmp_path: Path) -> None:
    """The meter at every step (`--noise-scale-every 1`), the noise scale alone deciding
    (`--auto-step-times off`): a switch is either a confident jump (the reading's lower bound
    reached the new batch) or follows two readings in a row that agreed."""
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--num-workers", "0", "--batch-schedule", "auto",
                 "--global-batch-min", "8", "--global-batch-max", "32", "--samples", "400", "--auto-step-times", "off",
                 "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--out", str(out)]) == 0
    switches = _rows(out, "batch-switch")
    assert [(row["from_global_batch"], row["to_global_batch"]) for row in switches] == [(8, 16), (16, 32)]
    readings = _rows(out, "noise-scale")
    for switch in switches:
        assert switch["reason"] == "auto" and switch["calibration"] == 1.0 and switch["micro_batches"] == 2
        before = [noise_reading(parse_row(NoiseScaleRecord, row, Source("metrics.jsonl"))[0])
                  for row in readings if row["step"] < switch["step"]]
        if switch["confident"]:
            assert switch["critical_batch_low"] == pytest.approx(before[-1].low)
            assert before[-1].low >= switch["to_global_batch"]
        else:
            for reading in before[-2:]:  # the two readings that agreed
                assert (reading.b_simple >= 2 * switch["from_global_batch"] if reading.resolved
                        else reading.low >= switch["from_global_batch"])
        if switch["resolved"]:
            assert switch["critical_batch"] == pytest.approx(switch["b_simple"]) == before[-1].b_simple
    after = [row for row in readings if row["step"] >= switches[-1]["step"]]
    assert {(row["small_batch"], row["big_batch"]) for row in after} == {(16, 32)}  # the meter follows the batch
    summary = json.loads((out / "summary.json").read_text())
    assert summary["samples"] >= 400 and summary["samples"] - 32 < 400


def test_with_bench_step_times_auto_takes_the_batch_of_least_time_to_the_same_progress(tmp_path: Path) -> None:
    """Bench rows that put every batch at the same step time: each larger batch saves steps at no
    cost, so the first reading with a bound takes auto to its max at once."""
    from trainspeed.bench.results import ResultRow
    from trainspeed.rows import row_line

    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(row_line(ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny",
                                                target="cpu:eager:fp32", batch_size=batch, status="ok",
                                                samples_per_s=batch / 0.01)) + "\n" for batch in (8, 16, 32)))
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--num-workers", "0", "--batch-schedule", "auto",
                 "--global-batch-min", "8", "--global-batch-max", "32", "--samples", "400", "--bench-jsonl", str(bench),
                 "--noise-scale-micro-batches", "2", "--auto-step-times", "off", "--out", str(out)]) == 0
    (switch,) = _rows(out, "batch-switch")
    assert (switch["from_global_batch"], switch["to_global_batch"], switch["timed"], switch["timed_by"],
            switch["confident"], switch["step_times"]) == (8, 32, True, "bench", True, None)
    assert switch["critical_batch_low"] > 0


def test_auto_weighs_the_step_times_its_own_windows_measured_once_it_has_two_batches(tmp_path: Path) -> None:
    """By default auto times the run's windows: the first switch comes from one batch's point (the
    meter's half-batches of the first windows; no slope yet, so the noise scale decides it), and
    every switch after two points is the batch of least t(B) (1 + B_noise / B) by those points, as
    the row records them; which batch that is depends on this machine's timings, the rule on none."""
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--num-workers", "0", "--batch-schedule", "auto",
                 "--global-batch-min", "8", "--global-batch-max", "64", "--samples", "1200", "--timing-warmup-steps", "1",
                 "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--out", str(out)]) == 0
    switches = _rows(out, "batch-switch")
    first = switches[0]
    assert (first["from_global_batch"], first["timed"], first["timed_by"]) == (8, False, None)
    assert [batch for batch, _ in first["step_times"]] == [4]  # 8 in 2 micro-batches of 4
    for switch in switches[1:]:
        points = tuple((batch, seconds) for batch, seconds in switch["step_times"])
        assert len(points) >= 2 and switch["timed_by"] == "run", switch
        noise = switch["critical_batch"] if switch["critical_batch"] is not None else switch["critical_batch_low"]
        candidates = [batch for batch in (8, 16, 32, 64) if batch >= switch["from_global_batch"]]
        time_to_progress = {batch: run_seconds_at(points, batch) * (1 + noise / batch) for batch in candidates}
        assert switch["to_global_batch"] == min(time_to_progress, key=time_to_progress.get)


def test_auto_measures_every_step_of_its_first_windows_then_one_step_in_k(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, "--synthetic-data", "--num-workers", "0", "--batch-schedule", "auto",
                 "--global-batch-min", "8", "--global-batch-max", "8", "--samples", "160",
                 "--noise-scale-micro-batches", "2", "--noise-scale-every", "8", "--out", str(out)]) == 0
    measured = [(row["step"], row["window_steps"], row["measured_steps"]) for row in _rows(out, "noise-scale")]
    # --log-every 2: the first 2 windows (steps 0-3) every step, then steps 8 and 16
    assert measured == [(2, 2, 2), (4, 2, 4), (10, 1, 5), (18, 1, 6)]
    (reading,) = json.loads((out / "summary.json").read_text())["noise_scale_readings"].values()
    assert reading["measured_steps"] == 6 and reading["measured_fraction"] == pytest.approx(6 / 20)


@pytest.mark.parametrize(("flags", "said"), [
    (["--batch-schedule", "16@0,8@64", "--steps", "4"], "the batch must grow from entry to entry"),
    (["--batch-schedule", "16@0,32@64,32@128", "--steps", "4"], "the batch must grow"),
    (["--batch-schedule", "16@0,32@64,64@64", "--steps", "4"], "the samples must increase"),
    (["--batch-schedule", "16@8", "--steps", "4"], "the first batch must start at @0"),
    (["--batch-schedule", "15@0", "--nproc", "2", "--steps", "4"], "global batch 15 is not a multiple of the run's 2 devices"),
    (["--batch-schedule", "auto", "--global-batch-min", "64", "--global-batch-max", "32", "--samples", "99"],
     "--global-batch-min 64 is more than --global-batch-max 32"),
    (["--batch-schedule", "auto", "--global-batch-min", "16", "--samples", "99"],
     "auto needs --global-batch-min N (where it starts) and --global-batch-max N"),
    (["--batch-schedule", "auto", "--global-batch-min", "15", "--global-batch-max", "64", "--nproc", "2",
      "--samples", "99"], "--global-batch-min 15 is not a multiple of the run's 2 devices"),
    (["--batch-schedule", "auto", "--global-batch-min", "16", "--global-batch-max", "64", "--steps", "4",
      "--noise-scale-micro-batches", "2"], "give --samples N or --epochs E"),
    (["--batch-schedule", "auto", "--global-batch-min", "16", "--global-batch-max", "64", "--samples", "99"],
     "give --noise-scale-micro-batches 2"),
    (["--batch-schedule", "auto", "--global-batch-min", "16", "--global-batch-max", "64", "--samples", "99",
      "--nproc", "2", "--noise-scale", "off"], "--noise-scale off does not measure"),
    (["--batch-schedule", "16@0,32@64", "--batch-size-per-device", "32", "--steps", "4"],
     "--batch-size-per-device 32 beside --batch-schedule, which starts at global batch 16"),
    (["--batch-schedule", "16@0", "--global-batch-max", "64", "--steps", "4"], "--global-batch-max is for --batch-schedule auto"),
    (["--global-batch-min", "16", "--steps", "4"], "--global-batch-min belongs to a --batch-schedule"),
    (["--max-batch-per-device", "16", "--steps", "4"], "--max-batch-per-device belongs to a --batch-schedule"),
    (["--batch-schedule", "auto", "--global-batch-min", "16", "--global-batch-max", "64", "--samples", "99",
      "--noise-scale-micro-batches", "2", "--max-batch-per-device", "8"], "auto never steps in micro-batches"),
    (["--batch-schedule", "12@0,24@48", "--noise-scale-micro-batches", "8", "--steps", "4"],
     "--noise-scale-micro-batches 8 must divide every per-device batch"),
    (["--steps", "4", "--samples", "64"], "give exactly one of --steps N or --epochs E (or --samples N)"),
], ids=["batch-falls", "batch-stays", "samples-stay", "not-at-0", "not-multiple-of-ranks", "min-above-max",
        "auto-without-max", "min-not-multiple", "auto-with-steps", "auto-one-rank-biased", "auto-noise-off",
        "batch-per-device-beside", "max-without-auto", "min-without-schedule", "cap-without-schedule",
        "auto-min-past-cap", "micro-not-dividing", "two-budgets"])
def test_a_schedule_no_run_could_follow_is_one_line_before_anything_runs(tmp_path: Path, cli_error, flags, said) -> None:
    out = tmp_path / "run"
    line = cli_error("train", *TOY, "--synthetic-data", *flags, "--out", str(out))
    assert said in line, line
    assert not out.exists()


def test_the_schedule_s_files_and_its_workload_are_checked_before_anything_runs(tmp_path: Path, toy_data: Path,
                                                                                 cli_error) -> None:
    out = tmp_path / "run"
    empty = tmp_path / "study"
    empty.mkdir()
    auto = ["--batch-schedule", "auto", "--global-batch-min", "16", "--global-batch-max", "64", "--samples", "99",
            "--noise-scale-micro-batches", "2"]
    assert "holds no critical-batch rows" in cli_error("train", *TOY, "--synthetic-data", *auto, "--critical-batch",
                                                       str(empty), "--out", str(out))
    assert "fewer than the schedule's largest global batch of 4096 (--batch-schedule)" in cli_error(
        "train", *TOY, "--data", str(toy_data), "--batch-schedule", "16@0,4096@64", "--steps", "4", "--out", str(out))
    assert "which accumulate a step that trains one network, and 'stylegan3' trains 2" in cli_error(
        "train", "--workload", "stylegan3", "--size", "tiny-t", "--synthetic-data", "--batch-schedule", "2@0,4@4",
        "--max-batch-per-device", "2", "--steps", "2", "--out", str(out))
    oom = tmp_path / "bench.jsonl"
    oom.write_text(json.dumps({"kind": "bench", "schema_version": 1, "run_id": "r", "timestamp": "t", "workload": "toy",
                               "size": "tiny", "target": "cpu:eager:fp32", "batch_size": 8, "status": "oom"}) + "\n")
    assert "ran out of memory at every batch the bench ran (from 8)" in cli_error(
        "train", *TOY, "--synthetic-data", "--batch-schedule", "16@0", "--steps", "2", "--bench-jsonl", str(oom),
        "--out", str(out))
    assert not out.exists()


def test_the_bench_s_out_of_memory_rows_cap_the_per_device_batch(tmp_path: Path, toy_data: Path) -> None:
    bench = tmp_path / "bench.jsonl"
    rows = [(16, "ok"), (32, "ok"), (64, "oom")]
    bench.write_text("".join(json.dumps({"kind": "bench", "schema_version": 1, "run_id": "r", "timestamp": "t",
                                         "workload": "toy", "size": "tiny", "target": "cpu:eager:fp32", "batch_size": batch,
                                         "status": status, "samples_per_s": 10.0 if status == "ok" else None}) + "\n"
                             for batch, status in rows))
    out = tmp_path / "run"
    assert main(["train", *TOY, "--data", str(toy_data), "--batch-schedule", "16@0,128@32", "--steps", "3",
                 "--bench-jsonl", str(bench), "--out", str(out)]) == 0
    (switch,) = _rows(out, "batch-switch")
    assert (switch["batch_size_per_device"], switch["micro_batches"]) == (128, 4)
    assert json.loads((out / "train_config.json").read_text())["batch"]["max_batch_per_device"] == 32


@pytest.mark.e2e
def test_until_and_stop_at_target_record_the_batch_and_samples_of_the_crossing(tmp_path: Path, data_args: list[str]) -> None:
    out = tmp_path / "run"
    assert main(["train", *TINY_RUN, *data_args, "--num-workers", "0", "--batch-schedule", "16@0,32@64",
                 "--samples", "4000", "--eval-every-samples", "64", "--eval-batches", "2",
                 "--until", "val/accuracy>=0.0001", "--stop-at-target", "--out", str(out)]) == 0
    (crossing,) = _rows(out, "time-to-target")
    assert crossing["reached"] and (crossing["step"], crossing["samples"], crossing["global_batch"]) == (4, 64, 16)
    out = tmp_path / "later"
    assert main(["train", *TINY_RUN, *data_args, "--num-workers", "0", "--batch-schedule", "16@0,32@64",
                 "--samples", "4000", "--eval-every-samples", "128", "--eval-batches", "2",
                 "--until", "val/accuracy>=0.0001", "--stop-at-target", "--out", str(out)]) == 0
    (crossing,) = _rows(out, "time-to-target")
    assert (crossing["step"], crossing["samples"], crossing["global_batch"]) == (6, 128, 32)
    (switch,) = _rows(out, "batch-switch")  # the run stopped while its new batch settled: the row is written
    assert (switch["step"], switch["samples"], switch["to_global_batch"]) == (5, 64, 32)


# --- kill -9 and --resume; XLA ---------------------------------------------------------

def _wait_for_step(run_dir: Path, process: subprocess.Popen, step: int, timeout_s: float) -> None:
    pointer = run_dir / "checkpoints" / "latest"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if pointer.exists() and int(pointer.read_text().strip()[5:14]) >= step:
            return
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint of step {step} appeared under {run_dir} (exit code {process.poll()})")


KILL_9_RUNS = {
    "1-rank": ["--batch-schedule", "auto", "--global-batch-min", "8", "--global-batch-max", "32",
               "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--samples", "480", "--num-workers",
               "1", "--checkpoint-every", "3", "--auto-step-times", "off"],
    "1-rank-one-step-in-2": ["--batch-schedule", "auto", "--global-batch-min", "8", "--global-batch-max", "32",
                             "--noise-scale-micro-batches", "2", "--noise-scale-every", "2", "--samples", "480",
                             "--num-workers", "1", "--checkpoint-every", "3", "--auto-step-times", "off"],
    "2-ranks": ["--nproc", "2", "--batch-schedule", "auto", "--global-batch-min", "8", "--global-batch-max", "32",
                "--samples", "480", "--num-workers", "1", "--checkpoint-every", "3", "--auto-step-times", "off"],
}
"""Auto from 8 to 32 by the noise scale alone (step times measured in a run differ between runs),
two switches, the second after the checkpoint the run is killed past: on one
rank its noise scale from 2 micro-batches, measuring every step, or one step in 2 (the meter's
moving averages, their weights and the steps it measured carried through the kill); on two
ranks, the noise scale of the ranks' gradients."""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("run", list(KILL_9_RUNS))
def test_kill_9_then_resume_with_a_schedule_ends_with_the_parameters_of_an_uninterrupted_run(
        tmp_path: Path, data_args: list[str], run: str) -> None:
    """The killed run is a child process; the uninterrupted run and the resume run in this one (on
    two ranks its launcher: the ranks are children)."""
    args = [*TINY_RUN, *data_args, *KILL_9_RUNS[run]]
    uninterrupted = tmp_path / "uninterrupted"
    assert main(["train", *args, "--out", str(uninterrupted)]) == 0
    reference = _rows(uninterrupted, "batch-switch")
    assert len(reference) == 2
    killed = tmp_path / "killed"
    process = start_child(train_command(*data_args, *KILL_9_RUNS[run], "--out", str(killed)), env=train_env(),
                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_step(killed, process, reference[0]["step"], timeout_s=240)  # past the first switch
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not (killed / "summary.json").exists(), "the run finished before it was killed"

    assert main(["train", *args, "--out", str(killed), "--resume"]) == 0
    summary = json.loads((killed / "summary.json").read_text())
    assert 0 < summary["first_step"] < summary["last_step"]
    finished, expected = all_networks(killed), all_networks(uninterrupted)
    differing = [name for name in expected if not torch.equal(finished[name], expected[name])]
    assert differing == [], f"{len(differing)} of {len(expected)} tensors differ, e.g. {differing[:3]}"
    switched = _rows(killed, "batch-switch")
    assert [(row["step"], row["samples"], row["to_global_batch"]) for row in switched] == \
        [(row["step"], row["samples"], row["to_global_batch"]) for row in reference]
    assert [row["measured_steps"] for row in _rows(killed, "noise-scale")][-1] == \
        [row["measured_steps"] for row in _rows(uninterrupted, "noise-scale")][-1]


XLA_MISSING = available_targets()["xla:lazy:fp32"]


@pytest.mark.e2e
@pytest.mark.skipif(XLA_MISSING is not None, reason=str(XLA_MISSING))
def test_spmd_on_xla_compiles_each_shape_once_and_keeps_it_out_of_the_steady_samples_per_s(tmp_path: Path) -> None:
    """Per device 4, then 8 (a new shape), then 16 in two micro-batches of 8 (the accumulation's
    graphs): every compilation lies in the first steps (the run's warm-up) or in the steps that
    settle a new batch, which the switch's row counts; the steady windows after them compile nothing."""
    out = tmp_path / "xla"
    result = run_train("--workload", "toy_workload:ToyWorkload", "--synthetic-data", "--target", "xla:lazy:fp32",
                       "--nproc", "2", "--num-workers", "0", "--batch-schedule", "8@0,16@16,32@48",
                       "--max-batch-per-device", "8", "--steps", "8", "--timing-warmup-steps", "2", "--log-every", "1",
                       "--out", str(out), timeout=300, extra_pythonpath=str(TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    switches = _rows(out, "batch-switch")
    assert [(row["step"], row["batch_size_per_device"], row["micro_batches"]) for row in switches] == \
        [(3, 8, 1), (5, 16, 2)]
    assert all(row["compilations"] > 0 for row in switches), switches
    windows = _rows(out, "train")
    settling = [row["step"] for row in windows if row["holds_switch"]]
    assert settling == [3, 4, 5, 6]  # two steps settle each new batch (--timing-warmup-steps 2)
    compiled = [row["step"] for row in windows if row["compilations"]]
    assert compiled and set(compiled) <= {1, 2, *settling}, windows
    assert [row["compilations"] for row in windows if row["step"] > 6] == [0, 0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["batch_schedule"]["compilations"] >= sum(row["compilations"] for row in windows)
    assert summary["steady_samples_per_s"] is not None and math.isfinite(summary["steady_samples_per_s"])
