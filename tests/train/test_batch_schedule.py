"""A batch schedule's parts on their own: the schedule's grammar and its refusals, the run's length,
the micro-batches, auto's rule, the calibration of critical-batch rows, the memory cap of bench rows,
the learning rate over samples, the data order across a switch, and the meter at a new batch. Runs
of the whole trainer are in test_batch_schedule_runs.py."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
import torch
from toy_workload import write_toy_data

from trainspeed.bench.results import ResultRow
from trainspeed.data import open_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.gradients.noise_scale import NoiseScaleMeter, two_batch_estimates
from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.rows import row_line
from trainspeed.stats import t_quantile
from trainspeed.train.batch_schedule import (
    AUTO_FIRST_READING_WINDOWS,
    AutoRule,
    BatchPlan,
    CalibrationPoint,
    NoiseReading,
    ScheduleEntry,
    auto_step,
    bench_memory_cap,
    bench_step_seconds,
    calibration_at,
    first_reading_steps,
    least_reading,
    micro_batches_for,
    noise_reading,
    parse_schedule,
    read_calibration,
    run_seconds_at,
    scheduled_batch,
    walk,
    window_step_time,
)
from trainspeed.train.loop import BatchStream, LoopState
from trainspeed.train.lr_schedule import lr_multiplier, samples_multiplier


def test_a_schedule_is_global_batches_at_samples_from_zero_on() -> None:
    entries = parse_schedule("64@0, 128@20000,256@60000", devices=2)
    assert entries == (ScheduleEntry(64, 0), ScheduleEntry(128, 20000), ScheduleEntry(256, 60000))
    assert [scheduled_batch(entries, samples) for samples in (0, 19999, 20000, 59999, 60000, 10**9)] == \
        [64, 64, 128, 128, 256, 256]


@pytest.mark.parametrize(("text", "devices", "said"), [
    ("64@0,128@100,96@200", 1, "the batch must grow from entry to entry, and 96@200 follows 128@100"),
    ("64@0,128@100,256@100", 1, "the samples must increase from entry to entry, and 256@100 follows 128@100"),
    ("64@0,128@100,256@50", 1, "the samples must increase"),
    ("64@10,128@100", 1, "the first batch must start at @0"),
    ("64@0,100@1000", 8, "global batch 100 is not a multiple of the run's 8 devices"),
    ("64", 1, "'64' is not GLOBAL_BATCH@SAMPLES"),
    ("64@0,x@5", 1, "'x@5' is not GLOBAL_BATCH@SAMPLES"),
    (",", 1, "no entry"),
    ("0@0", 1, "a global batch of 0 trains nothing"),
])
def test_a_schedule_that_does_not_grow_from_zero_in_multiples_of_the_devices_is_refused(
        text: str, devices: int, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_schedule(text, devices)
    assert str(refused.value).startswith(f"train: --batch-schedule {text!r}: ") and said in str(refused.value)


@pytest.mark.parametrize(("text", "said"), [
    ("64@0,128@" + "1" * 5000, "samples 11111111111111111111... (5000 digits) is more than 9,223,372,036,854,775,807"),
    ("64@0,128@" + "1" * 400, "samples 11111111111111111111... (400 digits) is more than 9,223,372,036,854,775,807"),
    ("1" * 5000 + "@0", "global batch 11111111111111111111... (5000 digits) is more than 1,099,511,627,776"),
    ("64@0,2199023255552@100", "global batch 2199023255552 is more than 1,099,511,627,776"),
], ids=["samples-of-5000-digits", "samples-of-400-digits", "a-batch-of-5000-digits", "a-batch-past-2^40"])
def test_a_schedule_s_number_too_large_for_a_run_is_one_short_line(text: str, said: str) -> None:
    """5,000 digits were Python's own ValueError (4,300 at most), 400 an OverflowError of the run's
    length: each a traceback. The line shows the schedule cut short."""
    with pytest.raises(UsageError) as refused:
        parse_schedule(text)
    assert said in str(refused.value) and len(str(refused.value)) < 300
    assert parse_schedule(f"64@0,128@{2**63 - 1}")[-1].from_samples == 2**63 - 1


def test_a_schedule_s_steps_and_samples_are_walked_in_closed_form() -> None:
    entries = parse_schedule("8@0,16@32,32@96")
    assert walk(entries, steps=10) == (10, 4 * 8 + 4 * 16 + 2 * 32)
    assert walk(entries, samples=100) == (9, 4 * 8 + 4 * 16 + 32)  # the first step boundary at or past 100
    assert walk(entries, samples=1) == (1, 8)
    assert walk(parse_schedule("8@0,16@4"), steps=3) == (3, 8 + 16 + 16)  # a step past an entry's samples
    assert walk(parse_schedule("7@0"), steps=3 * 10**8) == (3 * 10**8, 21 * 10**8)


@pytest.mark.parametrize(("per_device", "cap", "at_least", "parts"), [
    (64, None, 1, 1), (64, 64, 1, 1), (128, 64, 1, 2), (256, 100, 1, 4), (96, 40, 1, 3), (7, 3, 1, 7),
    (64, None, 2, 2), (64, 16, 2, 4), (48, 10, 4, 8),
])
def test_micro_batches_are_the_fewest_equal_slices_within_the_cap(per_device, cap, at_least, parts) -> None:
    assert micro_batches_for(per_device, cap, at_least) == parts


RULE = AutoRule(global_batch_min=64, global_batch_max=512, devices=2)


def _reading(value: float | None) -> NoiseReading:
    return NoiseReading(b_simple=value, lower=None, resolved=value is not None)


def test_auto_doubles_after_two_readings_in_a_row_that_say_the_next_batch_still_scales() -> None:
    first = auto_step(RULE, 64, 0, _reading(200.0), samples=0)
    assert (first.global_batch, first.agreeing, first.critical_batch) == (64, 1, 200.0)
    second = auto_step(RULE, 64, first.agreeing, _reading(128.0), samples=0)  # B_crit >= 2 x 64
    assert (second.global_batch, second.agreeing) == (128, 0)
    interrupted = auto_step(RULE, 64, 1, _reading(127.0), samples=0)
    assert (interrupted.global_batch, interrupted.agreeing) == (64, 0)


def test_an_unresolved_reading_agrees_only_where_its_lower_bound_reaches_the_batch_yet_auto_stops_at_the_max_and_cap(
        ) -> None:
    """An unresolved noise scale of a meter that measured few steps says little: it agrees to double
    where its bound says the noise scale is at least the batch, not below."""
    unresolved = NoiseReading(b_simple=None, lower=300.0, resolved=False)
    decision = auto_step(RULE, 256, 1, unresolved, samples=0)
    assert (decision.global_batch, decision.critical_batch, decision.confident) == (512, math.inf, False)
    assert auto_step(RULE, 512, 1, NoiseReading(None, 600.0, False), samples=0).global_batch == 512  # the max
    capped = AutoRule(global_batch_min=64, global_batch_max=4096, devices=2, max_batch_per_device=128)
    assert auto_step(capped, 256, 1, unresolved, samples=0).global_batch == 256  # 512 is 256 per device
    ignorant = auto_step(RULE, 256, 1, NoiseReading(None, 30.0, False), samples=0)
    assert (ignorant.global_batch, ignorant.agreeing) == (256, 0)  # a bound below the batch: no agreement
    assert auto_step(RULE, 256, 1, NoiseReading(None, None, False), samples=0).agreeing == 0  # no bound at all


def test_a_reading_whose_lower_confidence_bound_allows_it_jumps_several_doublings_at_once() -> None:
    resolved = NoiseReading(b_simple=1000.0, lower=None, resolved=True, low=300.0)
    jump = auto_step(RULE, 64, 0, resolved, samples=0)  # 64 x 4 = 256 <= 300 < 512
    assert (jump.global_batch, jump.agreeing, jump.confident, jump.critical_batch_low) == (256, 0, True, 300.0)
    near = auto_step(RULE, 64, 0, NoiseReading(1000.0, None, True, low=127.0), samples=0)
    assert (near.global_batch, near.agreeing, near.confident) == (64, 1, False)  # rule 2: the first agreeing reading
    assert auto_step(RULE, 64, 0, NoiseReading(1e6, None, True, low=1e5), samples=0).global_batch == 512  # the max
    capped = AutoRule(global_batch_min=64, global_batch_max=4096, devices=2, max_batch_per_device=128)
    assert auto_step(capped, 64, 0, NoiseReading(1e6, None, True, low=1e5), samples=0).global_batch == 256
    unresolved = auto_step(RULE, 64, 0, NoiseReading(None, 140.0, False), samples=0)  # the bound of an unresolved one
    assert (unresolved.global_batch, unresolved.confident) == (128, True)
    calibrated = AutoRule(global_batch_min=64, global_batch_max=512, devices=1, calibration=(CalibrationPoint(0, 0.5),))
    assert auto_step(calibrated, 64, 0, NoiseReading(1000.0, None, True, low=600.0), samples=0).global_batch == 256


def test_the_confident_bound_of_a_row_is_its_noise_scale_at_2_standard_errors_of_g_squared_more() -> None:
    resolved = noise_reading(NoiseScaleRecord(
        step=4, samples=256, network="policy", method="micro-batches", biased=False, small_batch=32, big_batch=64,
        grad_sq=1.0, trace_sigma=100.0, b_simple=100.0, grad_sq_avg=1.0, trace_sigma_avg=100.0, b_simple_avg=100.0,
        window_steps=2, grad_sq_se=0.1, grad_sq_avg_se=0.25, resolved=True, b_simple_lower=None))
    assert (resolved.b_simple, resolved.low) == (100.0, pytest.approx(100.0 / 1.5))
    unresolved = noise_reading(_noise_row("policy", None, resolved=False))
    assert unresolved.low == pytest.approx(unresolved.lower) == 40.0  # the bound the row holds
    few = noise_reading(dataclasses.replace(_noise_row("policy", None, resolved=False), effective_measurements=2.0))
    assert few.low == pytest.approx(12.0 / (0.1 + 0.1 * t_quantile(NormalDist().cdf(2.0), 1)))  # 0.8: two say little
    assert auto_step(RULE, 64, 0, few, samples=0).global_batch == 64


def test_auto_measures_every_step_of_its_first_windows_and_a_fixed_batch_none() -> None:
    from trainspeed.train.config import BatchScheduleConfig, TrainConfig

    auto = TrainConfig(log_every=7, samples=1000, noise_scale_micro_batches=2, batch_size_per_device=16,
                       batch=BatchScheduleConfig(schedule="auto", global_batch_min=16, global_batch_max=64))
    assert first_reading_steps(auto) == AUTO_FIRST_READING_WINDOWS * 7
    assert first_reading_steps(TrainConfig(log_every=7)) == 0


def _noise_row(network: str, b_simple_avg: float | None, resolved: bool | None = True) -> NoiseScaleRecord:
    """A row of B_simple `b_simple_avg` where resolved; else of |G|^2 0.1 +- 0.1 beside a tr(Sigma)
    of 12: at least 12 / (0.1 + 2 x 0.1) = 40."""
    grad_sq = 1.0 if resolved else 0.1
    return NoiseScaleRecord(step=4, samples=256, network=network, method="ranks", biased=False, small_batch=32,
                            big_batch=64, grad_sq=grad_sq, trace_sigma=12.0, b_simple=b_simple_avg, grad_sq_avg=grad_sq,
                            trace_sigma_avg=12.0, b_simple_avg=b_simple_avg, window_steps=2, grad_sq_se=0.1,
                            grad_sq_avg_se=0.1, resolved=resolved, b_simple_lower=None if resolved else 40.0)


def test_a_noise_scale_row_without_a_positive_g_squared_is_read_as_unresolved_and_agrees_by_its_bound() -> None:
    unresolved = noise_reading(_noise_row("policy", None, resolved=False))
    assert (unresolved.resolved, unresolved.b_simple, unresolved.lower) == (False, None, 40.0)
    not_positive = noise_reading(_noise_row("policy", None, resolved=None))  # a row written before assessing
    assert (not_positive.resolved, not_positive.b_simple) == (False, None)
    assert noise_reading(_noise_row("policy", 90.0, resolved=None)).b_simple == 90.0
    assert auto_step(RULE, 32, 1, unresolved, samples=0).global_batch == 64  # at least 40 >= 32: agrees
    assert auto_step(RULE, 64, 1, unresolved, samples=0).global_batch == 64  # 40 < 64: says nothing
    resolved = noise_reading(_noise_row("policy", 90.0))
    assert (resolved.resolved, resolved.b_simple) == (True, 90.0)
    assert auto_step(RULE, 64, 1, resolved, samples=0).global_batch == 64  # 90 < 2 x 64
    # Of several networks, the one that allows the smallest batch decides; unresolved ones allow any.
    assert least_reading([unresolved, resolved, noise_reading(_noise_row("value", 300.0))]) == resolved
    assert least_reading([unresolved]) == unresolved


def test_the_calibration_scales_b_simple_into_the_critical_batch_at_the_samples_trained() -> None:
    points = (CalibrationPoint(1000, 0.5), CalibrationPoint(3000, 1.5))
    assert [calibration_at(points, samples) for samples in (0, 1000, 2000, 3000, 10**6)] == [0.5, 0.5, 1.0, 1.5, 1.5]
    assert calibration_at((), 123) == 1.0
    rule = AutoRule(global_batch_min=64, global_batch_max=512, devices=1, calibration=points)
    assert auto_step(rule, 64, 1, _reading(200.0), samples=1000).global_batch == 64  # 0.5 x 200 < 128
    assert auto_step(rule, 64, 1, _reading(200.0), samples=3000).global_batch == 128


def test_a_window_is_a_point_of_the_step_time_at_its_batch_or_at_its_micro_batch_where_every_step_was_split() -> None:
    assert window_step_time(128, steps=8, split_steps=0, parts=1, seconds_per_step=0.08) == (128, 0.08)
    assert window_step_time(128, steps=8, split_steps=8, parts=2, seconds_per_step=0.08) == (64, 0.04)
    assert window_step_time(128, steps=8, split_steps=1, parts=2, seconds_per_step=0.08) is None  # both kinds
    assert window_step_time(128, steps=8, split_steps=0, parts=1, seconds_per_step=float("nan")) is None


def test_the_run_s_step_time_is_its_own_between_its_batches_and_held_between_flat_and_proportional_above() -> None:
    points = ((16, 0.01), (64, 0.03))
    assert run_seconds_at(points[:1], 16) is None  # one batch tells no slope
    assert run_seconds_at(points, 8) is None  # below the smallest
    assert run_seconds_at(points, 16) == 0.01 and run_seconds_at(points, 64) == 0.03
    assert run_seconds_at(points, 32) == pytest.approx(0.01 + 16 / 48 * 0.02)
    assert run_seconds_at(points, 128) == pytest.approx(0.03 + 64 * 0.02 / 48)  # the line through the two
    assert run_seconds_at(((16, 0.04), (64, 0.03)), 128) == 0.03  # a falling line: no cheaper than the largest
    assert run_seconds_at(((16, 0.001), (64, 0.03)), 128) == pytest.approx(0.06)  # no dearer per sample


def test_auto_with_the_run_s_step_times_takes_the_batch_of_least_time_to_the_same_progress() -> None:
    """A noise scale of 1,000 at batch 64: rule 2 would double. Where a step's time grows with its
    batch (one CPU thread), no larger batch saves time and auto stays; where it barely grows, it
    goes to the largest that fits. One point tells no slope: the noise scale alone decides."""
    rule = AutoRule(global_batch_min=64, global_batch_max=512, devices=1)
    reading = NoiseReading(1000.0, None, True, low=100.0)
    proportional = auto_step(rule, 64, 1, reading, samples=0, run_times=((32, 0.016), (64, 0.032)))
    assert (proportional.global_batch, proportional.timed, proportional.timed_by) == (64, True, "run")
    flat = auto_step(rule, 64, 1, reading, samples=0, run_times=((32, 0.030), (64, 0.031)))
    assert (flat.global_batch, flat.timed_by) == (512, "run")
    one_point = auto_step(rule, 64, 1, reading, samples=0, run_times=((32, 0.016),))
    assert (one_point.global_batch, one_point.timed, one_point.timed_by) == (128, False, None)  # rule 2
    benched = dataclasses.replace(rule, step_seconds=((64, 0.03), (128, 0.031), (256, 0.5), (512, 1.0)))
    assert auto_step(benched, 64, 1, reading, samples=0, run_times=((32, 0.016),)).timed_by == "bench"
    assert auto_step(benched, 64, 1, reading, samples=0, run_times=((32, 0.016), (64, 0.032))).timed_by == "run"


def test_the_run_s_step_times_go_through_a_checkpoint_and_an_older_one_without_them_loads() -> None:
    rule = AutoRule(global_batch_min=8, global_batch_max=64, devices=1)
    plan = BatchPlan(entries=None, rule=rule, global_batch=8)
    for seconds in (0.03, 0.01, 0.02, *[0.02] * 20):
        plan.time_window((8, seconds))
    plan.time_window((4, 0.012))
    plan.time_window(None)
    assert plan.step_times == ((4, 0.012), (8, 0.02)) and len(plan.window_seconds[8]) == 16
    resumed = BatchPlan(entries=None, rule=rule, global_batch=8)
    resumed.load_state(json.loads(json.dumps(plan.state())))
    assert resumed.window_seconds == plan.window_seconds
    older = {key: value for key, value in plan.state().items() if key != "window_seconds"}
    resumed.load_state(older)
    assert resumed.window_seconds == {}
    for bad in ({"8": [0.1]}, [[8, [-1.0]]], [[8, 0.1]], [["8", [0.1]]]):
        with pytest.raises(ValueError, match="step times"):
            resumed.load_state({**plan.state(), "window_seconds": bad})


def test_critical_batch_rows_are_read_from_a_study_folder_and_a_folder_without_them_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    rows = [{"kind": "critical-batch", "schema_version": 1, "samples": 2000, "critical_batch": 300, "b_simple": 100.0},
            {"kind": "critical-batch", "schema_version": 1, "samples": 2000, "critical_batch": 100, "b_simple": 100.0},
            {"kind": "critical-batch", "schema_version": 1, "samples": 500, "critical_batch": 64, "b_simple": 128.0},
            {"kind": "critical-batch", "schema_version": 1, "samples": 900, "critical_batch": 64, "b_simple": None},
            {"kind": "study", "schema_version": 1, "samples": 1, "critical_batch": 1, "b_simple": 1.0}]
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert read_calibration(str(folder)) == (CalibrationPoint(500, 0.5), CalibrationPoint(2000, 2.0))
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"samples": 10, "critical_batch": 50, "b_simple": 25}) + "\n")
    assert read_calibration(str(plain)) == (CalibrationPoint(10, 2.0),)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="holds no critical-batch rows"):
        read_calibration(str(empty))


@pytest.mark.parametrize(("row", "said"), [
    ({"critical_batch": 1e308, "b_simple": 1e-300}, "critical_batch must be a batch, from 1 to 2^40, not 1e+308"),
    ({"critical_batch": 64, "b_simple": 1e-300},
     "critical_batch 64 / b_simple 1e-300 = 6.4e+301, a calibration no study measures"),
    ({"critical_batch": 64, "b_simple": 1e300}, "critical_batch 64 / b_simple 1e+300 = 6.4e-299, a calibration no"),
    ({"critical_batch": 64, "b_simple": float("nan")}, "b_simple must be a finite number, not nan"),
    ({"critical_batch": float("inf"), "b_simple": 32.0}, "critical_batch must be a batch, from 1 to 2^40, not inf"),
    ({"critical_batch": 0, "b_simple": 32.0}, "critical_batch must be a batch, from 1 to 2^40, not 0"),
    ({"critical_batch": 64, "b_simple": 32.0, "samples": -5}, "samples must be a whole number from 0 to"),
], ids=["1e308-over-1e-300", "a-ratio-of-1e301", "a-ratio-of-1e-299", "nan", "infinite", "a-batch-of-0",
        "negative-samples"])
def test_critical_batch_rows_no_study_measures_are_refused_in_one_line(tmp_path: Path, row: dict, said: str) -> None:
    """Finite rows whose ratio overflows made auto double at every reading and write a calibration
    of Infinity into the run's rows, which its readers then refused: handed in, they are refused."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"kind": "critical-batch", "samples": 0, "critical_batch": 64, "b_simple": 32.0})
                    + "\n" + json.dumps({"kind": "critical-batch", "samples": 100, **row}) + "\n")
    with pytest.raises(UsageError) as refused:
        read_calibration(str(rows))
    assert str(refused.value).startswith(f"train: --critical-batch {rows}:2: critical-batch row: {said}")


def test_a_critical_batch_row_with_a_noise_scale_not_above_0_gives_no_point(tmp_path: Path) -> None:
    """A study measures a negative B_simple where its tr(Sigma) estimate is below 0: no ratio."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"kind": "critical-batch", "samples": samples, "critical_batch": 64,
                                        "b_simple": simple}) + "\n" for samples, simple in ((0, -3.0), (10, 32.0))))
    assert read_calibration(str(rows)) == (CalibrationPoint(10, 2.0),)


def test_critical_batch_rows_no_study_measures_are_refused_before_a_run_trains(tmp_path: Path, cli_error) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"kind": "critical-batch", "samples": 0, "critical_batch": 1e308, "b_simple": 1e-300})
                    + "\n")
    line = cli_error("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--batch-schedule", "auto",
                     "--global-batch-min", "8", "--global-batch-max", "64", "--samples", "64",
                     "--noise-scale-micro-batches", "2", "--critical-batch", str(rows), "--out", str(tmp_path / "run"))
    assert line == (f"trainspeed: error: train: --critical-batch {rows}:1: critical-batch row: critical_batch must be "
                    "a batch, from 1 to 2^40, not 1e+308")
    assert not (tmp_path / "run").exists()


def test_a_schedule_s_number_too_large_is_one_line_before_a_run_trains(tmp_path: Path, cli_error) -> None:
    line = cli_error("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data", "--steps", "2",
                     "--batch-schedule", "64@0,128@" + "1" * 5000, "--out", str(tmp_path / "run"))
    assert "samples 11111111111111111111... (5000 digits) is more than 9,223,372,036,854,775,807" in line and len(line) < 300
    assert not (tmp_path / "run").exists()


def _bench(path: Path, *batches: tuple[int, str], target: str = "cpu:eager:fp32") -> Path:
    path.write_text("".join(row_line(ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny",
                                               target=target, batch_size=batch, status=status,
                                               samples_per_s=100.0 if status == "ok" else None)) + "\n"
                            for batch, status in batches))
    return path


def test_the_memory_cap_is_the_largest_batch_the_bench_ran_below_its_first_out_of_memory(tmp_path: Path) -> None:
    bench = _bench(tmp_path / "b.jsonl", (64, "ok"), (128, "ok"), (256, "oom"), (512, "skipped"), (1024, "ok"),
                   (32, "oom", ), target="cpu:eager:fp32")
    with pytest.raises(UsageError, match="ran out of memory at every batch"):
        bench_memory_cap(str(bench), "mahjong", "tiny", "cpu:eager:fp32")
    bench = _bench(tmp_path / "b.jsonl", (64, "ok"), (128, "invalid"), (256, "oom"), (512, "skipped"))
    assert bench_memory_cap(str(bench), "mahjong", "tiny", "cpu:eager:fp32") == 128
    assert bench_memory_cap(str(_bench(tmp_path / "c.jsonl", (64, "ok"))), "mahjong", "tiny", "cpu:eager:fp32") is None
    with pytest.raises(UsageError, match="has no row of mahjong/tiny on xla:lazy:fp32"):
        bench_memory_cap(str(bench), "mahjong", "tiny", "xla:lazy:fp32")


def test_the_step_times_are_the_bench_s_fastest_ok_rows_of_the_run_s_configuration(tmp_path: Path) -> None:
    rows = [ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target="cpu:eager:fp32", batch_size=b,
                      status=status, samples_per_s=rate, noise_scale=meter)
            for b, status, rate, meter in [(16, "ok", 4000.0, None), (32, "ok", 6400.0, None), (32, "ok", 8000.0, None),
                                           (32, "ok", 9000.0, "previous-step"), (64, "oom", None, None)]]
    rows.append(ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target="xla:lazy:fp32",
                          batch_size=128, status="ok", samples_per_s=1.0))
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(row_line(row) + "\n" for row in rows))
    assert bench_step_seconds(str(bench), "mahjong", "tiny", "cpu:eager:fp32") == ((16, 0.004), (32, 0.004))
    assert bench_step_seconds(str(bench), "other", "tiny", "cpu:eager:fp32") == ()


STEP_SECONDS = ((16, 0.0030), (32, 0.0035), (64, 0.0045), (128, 0.0060), (256, 0.0130), (512, 0.0260))
"""A small model's step: its time grows far slower than its batch up to 128."""


def test_with_step_times_auto_takes_the_batch_of_least_time_to_the_same_progress_and_never_goes_back() -> None:
    """t(B) (1 + B_noise / B) with B_noise the reading's B_simple: at 60, 64 (0.0087 s against 0.0088
    at 128 and 0.0101 at 32), above the critical batch, where rules 1 and 2 stop below."""
    timed = AutoRule(global_batch_min=16, global_batch_max=512, devices=1, step_seconds=STEP_SECONDS)
    decision = auto_step(timed, 16, 0, NoiseReading(60.0, None, True, low=45.0), samples=0)
    assert (decision.global_batch, decision.timed, decision.confident) == (64, True, False)
    untimed = AutoRule(global_batch_min=16, global_batch_max=512, devices=1)
    assert auto_step(untimed, 16, 0, NoiseReading(60.0, None, True, low=45.0), samples=0).global_batch == 32
    stays = auto_step(timed, 16, 1, NoiseReading(5.0, None, True, low=3.0), samples=0)  # a noise scale of 5: 16
    assert (stays.global_batch, stays.agreeing, stays.timed, stays.confident) == (16, 0, True, False)
    assert auto_step(timed, 128, 0, NoiseReading(5.0, None, True, low=3.0), samples=0).global_batch == 128  # not back
    unresolved = auto_step(timed, 16, 0, NoiseReading(None, 1e9, False), samples=0)  # at least 1e9: t(B)/B least
    assert (unresolved.global_batch, unresolved.confident) == (128, True)
    capped = AutoRule(global_batch_min=16, global_batch_max=32, devices=1, step_seconds=STEP_SECONDS)
    assert auto_step(capped, 16, 0, NoiseReading(None, 1e9, False), samples=0).global_batch == 32
    two_ranks = AutoRule(global_batch_min=32, global_batch_max=1024, devices=2, step_seconds=STEP_SECONDS)
    assert auto_step(two_ranks, 32, 0, NoiseReading(60.0, None, True, low=40.0), samples=0).global_batch == 128
    unbenched = AutoRule(global_batch_min=8, global_batch_max=512, devices=1, step_seconds=STEP_SECONDS)
    assert not auto_step(unbenched, 8, 0, NoiseReading(60.0, None, True, low=45.0), samples=0).timed  # rules 1-2


def test_the_lr_over_samples_is_the_lr_over_steps_where_the_batch_never_switches() -> None:
    batch, steps, warmup = 24, 50, 4
    for step in range(steps):
        assert samples_multiplier(step * batch, batch, steps * batch, warmup * batch, 0.1, batch) == \
            pytest.approx(lr_multiplier(step, steps, warmup, 0.1))


def test_the_lr_over_samples_does_not_jump_where_the_batch_switches() -> None:
    before = samples_multiplier(4000, 64, 10000, 500, 0.0, 64)
    after = samples_multiplier(4000, 256, 10000, 500, 0.0, 64)
    assert before == after


def test_a_plan_switches_to_the_due_batch_and_carries_its_switches_through_a_checkpoint() -> None:
    plan = BatchPlan(entries=parse_schedule("8@0,16@32"), rule=None, global_batch=8)
    assert plan.due(24) == 8 and plan.due(32) == 16
    made = plan.switch(step=4, samples=32)
    assert (made.step, made.from_global_batch, made.to_global_batch, plan.global_batch) == (5, 8, 16, 16)
    resumed = BatchPlan(entries=plan.entries, rule=None, global_batch=8)
    resumed.load_state(json.loads(json.dumps(plan.state())))
    assert resumed.global_batch == 16 and resumed.switches == plan.switches


def _read_ids(loader, units_per_step: list[int], state: LoopState) -> list[np.ndarray]:
    stream = BatchStream(loader, state)
    return [stream.next(units)["meta_sample_id"].numpy() for units in units_per_step]


@pytest.mark.parametrize("ranks", [1, 2])
def test_the_samples_read_across_switches_are_the_epoch_s_order_in_order_and_each_once(tmp_path: Path, ranks: int) -> None:
    """Steps of 1, then 2, then 4 of the loader's batches read the epoch's one permutation in order;
    a step that no longer fits the epoch starts the next epoch, whose order starts again."""
    folder = write_toy_data(tmp_path / "toy", samples=256)
    unit = 4
    configs = [LoaderConfig(batch_size=unit, rank=rank, world_size=ranks, seed=3, num_workers=0) for rank in range(ranks)]
    loaders = [open_dataset(folder, config, outputs=("x", "y")) for config in configs]
    global_unit = unit * ranks
    per_epoch = len(loaders[0])
    units = [1, 1, 2, 2, 4, 4, 4]
    states = [LoopState() for _ in loaders]
    read = [_read_ids(loader, units, state) for loader, state in zip(loaders, states)]
    order = loaders[0].layout.epoch_order(configs[0], 0)
    steps_ids = [np.concatenate([read[rank][step] for rank in range(ranks)]) for step in range(len(units))]
    trained = np.concatenate(steps_ids)
    assert sorted(trained) == sorted(order[:sum(units) * global_unit])
    assert len(set(trained.tolist())) == len(trained)
    for step, ids in enumerate(steps_ids):  # each step is consecutive global batches of the order
        start = sum(units[:step]) * global_unit
        assert sorted(ids) == sorted(order[start:start + units[step] * global_unit])
    # Past the epoch's end: the unfinished step is read from the next epoch's order from its start.
    left = per_epoch - sum(units)
    tail = [_read_ids(loader, [left + 1], state) for loader, state in zip(loaders, states)]
    assert all(state.epoch == 1 for state in states)
    next_order = loaders[0].layout.epoch_order(configs[0], 1)
    assert sorted(np.concatenate([ids[0] for ids in tail])) == sorted(next_order[:(left + 1) * global_unit])


def test_a_step_larger_than_an_epoch_is_one_line(tmp_path: Path) -> None:
    folder = write_toy_data(tmp_path / "toy", samples=64)
    loader = open_dataset(folder, LoaderConfig(batch_size=8, num_workers=0), outputs=("x", "y"))
    with pytest.raises(UsageError, match="fewer samples than one global batch"):
        BatchStream(loader, LoopState()).next(len(loader) + 1)


class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(3))


def test_the_meter_carries_its_moving_averages_to_the_new_batches_of_a_switch() -> None:
    from trainspeed.workloads.base import Trainable

    class One(Trainable):
        def setup_optimizers(self, fused: bool = False) -> None:
            self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=0.1)}

        def train_step(self, batch):  # pragma: no cover - not stepped here
            raise AssertionError

    trainable = One({"net": _Linear()})
    trainable.setup_optimizers()
    meter = NoiseScaleMeter(trainable, world_size=2, samples_per_rank=32, micro_batches=1, smoothing=0.5)
    grad_sq, trace_sigma = 2.0, 300.0
    meter.ranks_step("net", torch.tensor(grad_sq + trace_sigma / 32), torch.tensor(grad_sq + trace_sigma / 64))
    meter.resize(samples_per_rank=128, micro_batches=2)
    assert (meter.method, meter.small_batch, meter.big_batch) == ("ranks", 64, 128)
    norms = meter.networks["net"]
    carried = two_batch_estimates(float(norms.average_small), float(norms.average_big), 64, 128)
    assert carried == pytest.approx((grad_sq * 0.5, trace_sigma * 0.5))  # one step of smoothing 0.5, uncorrected
    state = meter.state()
    fresh = NoiseScaleMeter(trainable, world_size=2, samples_per_rank=32, micro_batches=1, smoothing=0.5)
    fresh.load_state(state)
    assert (fresh.small_batch, fresh.big_batch, fresh.networks["net"].carried_small) == \
        (64, 128, pytest.approx(float(norms.average_small)))
