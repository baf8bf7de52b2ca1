"""`plan --check-rebench`: a checked configuration's bench row measured again just before its runs,
and the prediction at the machine's speed now beside the prediction (the run through the CLI is in
test_plan_measure.py's check at two seeds)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainspeed.bench.flags import bench_command
from trainspeed.bench.results import ResultRow, read_rows
from trainspeed.plan.check import check_line, check_row
from trainspeed.plan.inputs import read_plan_inputs
from trainspeed.plan.rows import PlanRow
from trainspeed.plan.speed_now import (
    REBENCH_MIN_WINDOW_S,
    REBENCH_WINDOWS,
    Rebench,
    interval_at,
    planned_bench,
    predicted_at,
    rebench_config,
    why_not_rebenched,
)
from trainspeed.report.reading import read_inputs
from trainspeed.train.runs import read_run_summary

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
PLAN = RESULTS / "plan_check_study_seeds_gpt2.jsonl"
"""A committed plan of hf:gpt2 (bench rows in its folder), with compiled configurations."""
BENCH = RESULTS / "plan_check_study_seeds_gpt2" / "bench.jsonl"


def planned(config: str) -> PlanRow:
    from trainspeed.plan.report import PART

    (row,) = [found.row for found in read_inputs([PLAN], (PART,)).of(PlanRow) if found.row.config == config]
    return row


def bench_of(row: PlanRow) -> ResultRow:
    """The committed bench row the plan row's step time came from (its first source names the line)."""
    line = int(row.sources[0].rsplit(":", 1)[1])
    return read_rows(BENCH)[line - 1]


def test_the_speed_now_scales_the_steps_and_validations_by_the_step_and_the_compilations_by_the_compile():
    """A step 1.25x as long and a first compilation twice the plan's: the start-up stays as planned,
    every compilation doubles, the rest (steps and validations) takes 1.25x."""
    row = planned("cpu:compile:fp32/1/128")
    bench = bench_of(row)
    first = row.compilations[0].seconds  # type: ignore[index]
    steady = bench.batch_size / (bench.samples_per_s / 1.25)  # type: ignore[operator]
    now = dataclasses.replace(bench, samples_per_s=bench.samples_per_s / 1.25, step_time_s=steady,  # type: ignore[operator]
                              first_step_s=steady + 2 * first, compiles_before=0)
    again = Rebench(bench, now, "rebench.jsonl:1")
    assert again.step_ratio == pytest.approx(1.25) and again.compile_now_s == pytest.approx(2 * first)
    rest = row.predicted_s - row.overhead_s - row.compile_s  # type: ignore[operator]
    expected = row.overhead_s + 2 * row.compile_s + 1.25 * rest  # type: ignore[operator]
    assert again.predicted_s(row) == pytest.approx(expected)
    assert f"a step 1.25x as long), first compilation {2 * first:,.1f} s against {first:,.1f} planned" in again.line(row)
    # the same speed as planned predicts the same, and its interval is the plan's
    assert predicted_at(row, 1.0, first) == pytest.approx(row.predicted_s)
    assert interval_at(row, 1.0, first) == [pytest.approx(end) for end in row.predicted_s_ci95]  # type: ignore[union-attr]
    low, high = again.interval(row)  # type: ignore[misc]
    assert low == pytest.approx(predicted_at(row, 1.25, 2 * first, row.predicted_s_ci95[0]))  # type: ignore[index]
    assert low < again.predicted_s(row) < high


def test_an_eager_configuration_at_the_speed_now_scales_its_steps_alone():
    row = planned("cpu:eager:fp32/1/8")
    bench = bench_of(row)
    now = dataclasses.replace(bench, samples_per_s=bench.samples_per_s * 2)  # type: ignore[operator]
    again = Rebench(bench, now, "rebench.jsonl:1")
    assert bench.compiles_before is None and again.compile_now_s is None
    assert again.predicted_s(row) == pytest.approx(row.overhead_s + (row.predicted_s - row.overhead_s) / 2)  # type: ignore[operator]


def test_a_check_row_holds_the_prediction_at_the_speed_now_and_its_line_says_both():
    """A committed check run of the eager configuration, held against its prediction and against the
    prediction at a machine 20% slower: the row keeps both, and the line gives the second after the first."""
    row = planned("cpu:eager:fp32/1/8")
    bench = bench_of(row)
    slower = Rebench(bench, dataclasses.replace(bench, samples_per_s=bench.samples_per_s / 1.2), "again.jsonl:1")  # type: ignore[operator]
    run_dir = RESULTS / "plan_check_study_seeds_gpt2" / "checks" / "cpu-eager-fp32-1-8" / "seed-1000"
    measured_s = 1.3 * row.predicted_s  # type: ignore[operator]
    checked = check_row(row, read_run_summary(run_dir), run_dir, measured_s, 1000, 0.25, "c", rebenched=slower)
    now_s = slower.predicted_s(row)
    assert (checked.ratio, checked.within) == (pytest.approx(1.3), False)
    assert (checked.predicted_s_now, checked.ratio_now) == (pytest.approx(now_s), pytest.approx(measured_s / now_s))
    assert checked.within_now is (abs(measured_s / now_s - 1) <= 0.25) and checked.within_now is True
    assert (checked.bench_samples_per_s, checked.rebench_samples_per_s) == (bench.samples_per_s,
                                                                           bench.samples_per_s / 1.2)  # type: ignore[operator]
    low, high = slower.interval(row)  # type: ignore[misc]
    assert checked.predicted_s_now_ci95 == [pytest.approx(low), pytest.approx(high)]
    assert low < now_s < high and checked.inside_now is (low <= measured_s <= high)
    line = check_line(checked)
    assert "(ratio 1.30, outside ±25%" in line
    assert line.endswith(f"; at the speed now (the bench row again {bench.samples_per_s / 1.2:,.1f} samples/s against "  # type: ignore[operator]
                         f"{bench.samples_per_s:,.1f}) predicted {now_s:,.1f} s (ratio {measured_s / now_s:.2f}, "
                         f"within ±25%, {'inside' if checked.inside_now else 'outside'} its 95% interval "
                         f"[{low:,.1f}, {high:,.1f}])")
    plain = check_row(row, read_run_summary(run_dir), run_dir, measured_s, 1000, 0.25, "c")
    assert plain.predicted_s_now is None and plain.within_now is None and "speed now" not in check_line(plain)


def test_the_bench_again_takes_the_planned_row_s_own_settings(tmp_path):
    row = planned("cpu:compile:fp32/1/128")
    bench = bench_of(row)
    config = rebench_config(bench, "hf:gpt2", tmp_path / "again.jsonl")
    assert (config.targets, config.batch_sizes, config.size, config.feeds, config.noise_scale) == (
        [bench.target], [128], bench.size, ["device"], ["off"])
    assert (config.threads, config.plan.warmup_steps) == (bench.machine.torch_threads, bench.warmup_steps)  # type: ignore[union-attr]
    # its 3 windows of 0.5 s taken as 5 of 1 s: more and longer windows outvote a wavering second
    assert (bench.windows, bench.min_window_s) == (3, 0.5) and (config.plan.windows, config.plan.min_window_s) == (
        REBENCH_WINDOWS, REBENCH_MIN_WINDOW_S) == (5, 1.0)
    longer = dataclasses.replace(bench, windows=9, min_window_s=3.0)
    assert (rebench_config(longer, "hf:gpt2", tmp_path / "a.jsonl").plan.windows,
            rebench_config(longer, "hf:gpt2", tmp_path / "a.jsonl").plan.min_window_s) == (9, 3.0)
    assert bench_command(config)[:5] == ["bench", "--workload", "hf:gpt2", "--size", "tiny,seq=65"]


def test_what_cannot_be_benched_again_says_why():
    inputs = read_plan_inputs([BENCH, RESULTS / "plan_check_study_seeds_gpt2" / "time_to_target.jsonl"])
    row = planned("cpu:compile:fp32/1/128")
    found = planned_bench(inputs, dataclasses.replace(row, sources=[f"{BENCH}:6", *row.sources[1:]]))
    assert found is not None and found.row.batch_size == 128 and why_not_rebenched(row, found) is None
    assert "not among the plan's inputs" in why_not_rebenched(row, planned_bench(inputs, row))  # type: ignore[operator]
    assert "a growing batch" in why_not_rebenched(dataclasses.replace(row, schedule="auto"), found)  # type: ignore[operator]
    remote = dataclasses.replace(found, row=dataclasses.replace(found.row, transport="grpc"))
    assert "timed a device elsewhere" in why_not_rebenched(row, remote)  # type: ignore[operator]


def test_a_rebench_without_a_check_is_one_line(cli_error, tmp_path):
    error = cli_error("plan", str(BENCH), "--check-rebench")
    assert "--check-rebench benches again the configurations --check runs; give --check too" in error


def test_a_bench_row_s_settings_this_machine_refuses_are_one_line_before_anything_runs(tmp_path):
    """A row benched at more threads than this machine has: refused when the checks are set up, naming
    the configuration, before a check or a bench runs (nothing is written to the check folder)."""
    from trainspeed.errors import UsageError
    from trainspeed.plan.speed_now import check_rebenchable

    row = planned("cpu:compile:fp32/1/128")
    inputs = read_plan_inputs([BENCH, RESULTS / "plan_check_study_seeds_gpt2" / "time_to_target.jsonl"])
    found = planned_bench(inputs, dataclasses.replace(row, sources=[f"{BENCH}:6", *row.sources[1:]]))
    assert found is not None
    many = dataclasses.replace(found, row=dataclasses.replace(
        found.row, machine=dataclasses.replace(found.row.machine, torch_threads=4096)))  # type: ignore[type-var]
    inputs = dataclasses.replace(inputs, bench=[many])
    with pytest.raises(UsageError) as refused:
        check_rebenchable(inputs, [dataclasses.replace(row, sources=[str(many.source)])], "hf:gpt2", tmp_path / "checks")
    assert str(refused.value).startswith("plan: --check-rebench cpu:compile:fp32/1/128: its bench row's settings: ")
    assert "threads" in str(refused.value) and not (tmp_path / "checks").exists()
