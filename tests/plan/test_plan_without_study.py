"""A plan without a study: one run that met the goal gives the steps (McCandlish's model through its
own steps, with its noise scale near the goal), its start-up and its validations; every compilation a
compiled run makes is counted or said to be not measured; the interval draws the step time and the
start-up, not only the steps; and a batch that grows is integrated over the run."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from trainspeed.bench.results import ResultRow
from trainspeed.gradients.rows import NoiseScaleRecord
from trainspeed.plan.inputs import Identity, PlanInputs
from trainspeed.plan.plan import PlanGrid, plan_rows, table
from trainspeed.plan.run_costs import NoiseReading
from trainspeed.plan.steps import Profile, ProfilePiece, Segment, auto_phases, noise_model, steps_model
from trainspeed.report.inputs import Read
from trainspeed.rows import Source
from trainspeed.train.rows import EvalRecord, RunSummary, TimeToTargetRecord, WindowRecord
from trainspeed.train.runs import TrainRun

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
GOAL = "val/accuracy>=0.8"
EAGER, COMPILED = "cpu:eager:fp32", "cpu:compile:fp32"


def GROWING(step: int) -> float:
    """A noise scale that grows from 20 to 200 over a run of 100 steps."""
    return 2.0 * step


def bench(target: str, batch: int, step_s: float, first_step_s: float | None = None,
          window_step_s: list[float] | None = None) -> Read:
    """A bench row of `step_s` seconds per step; its timed windows (10 steps each) where given."""
    windows = [10 * seconds for seconds in window_step_s] if window_step_s else None
    row = ResultRow(run_id="r", timestamp="2026-01-01T00:00:00", workload="mahjong", size="tiny", target=target,
                    batch_size=batch, status="ok", samples_per_s=batch / step_s, step_time_s=step_s,
                    first_step_s=first_step_s, window_s=windows, steps_per_window=10 if windows else None,
                    workload_sha256="abc")
    return Read(row, Source("bench.jsonl", 1), {})


def run(*, target: str = EAGER, batch: int = 64, devices: int = 1, steps: int = 100, step_s: float = 0.01,
        first_window_extra_s: float = 0.0, validation_s: float = 0.5, first_validation_extra_s: float = 0.0,
        noise: float | Callable[[int], float | None] | None = 64.0, noise_last_quarter: float = 999.0,
        startup_s: float | None = 3.0, reached: bool = True, micro_batches: int = 1, measure_every: int | None = None,
        name: str = "base") -> TrainRun:
    """A run of `steps` steps at global `batch`: a window every 10 steps of `step_s` each (the first
    `first_window_extra_s` longer), a validation every 20 steps pausing `validation_s` (the first
    `first_validation_extra_s` more), the goal met at its last validation (interpolated to the
    end: its value lies on the goal), its noise scale `noise` in every window (or `noise(step)`;
    None: unresolved), and a summary whose noise scale over the last quarter is `noise_last_quarter`."""
    metrics: list = []
    paused = 0.0
    for step in range(10, steps + 1, 10):
        train_s = step * step_s + first_window_extra_s
        metrics.append(WindowRecord(step=step, epoch=0, loss=1.0, lr=1e-3, samples_per_s=batch / step_s,
                                    step_time_s=(train_s if step == 10 else 10 * step_s) / 10, data_wait_s_per_step=0.0,
                                    data_wait_fraction=0.0, data_wait_fraction_worst_rank=0.0, h2d_s_per_step=0.0,
                                    elapsed_s=train_s, run_train_s=train_s, run_wall_s=train_s + paused))
        measured = noise(step) if callable(noise) else noise
        metrics.append(NoiseScaleRecord(
            step=step, samples=step * batch, network="policy",
            method="micro-batches" if micro_batches > 1 else "previous-step", biased=micro_batches == 1,
            small_batch=batch // micro_batches if micro_batches > 1 else batch,
            big_batch=batch if micro_batches > 1 else 2 * batch, grad_sq=1.0, trace_sigma=64.0, b_simple=measured,
            grad_sq_avg=1.0, trace_sigma_avg=64.0, b_simple_avg=measured, window_steps=10,
            grad_sq_se=0.1, grad_sq_avg_se=0.1, resolved=measured is not None, b_simple_lower=None,
            measure_every=measure_every))
        if step % 20 == 0:
            metrics.append(EvalRecord(step=step, metrics={"accuracy": 0.8 * step / steps}))
            paused += validation_s + (first_validation_extra_s if step == 20 else 0.0)
    train_s = steps * step_s + first_window_extra_s
    record = TimeToTargetRecord(
        until=GOAL, metric="accuracy", reached=reached, step=steps, samples=steps * batch, value=0.8 if reached else None,
        train_s=train_s, wall_s=train_s + paused, previous_step=steps - 20, previous_samples=(steps - 20) * batch,
        previous_value=0.8 * (steps - 20) / steps, previous_train_s=None, previous_wall_s=None, best_value=0.8,
        best_step=steps, resumes=0, lost_train_s=0.0, lost_wall_s=0.0, global_batch=batch, world_size=devices,
        target=target)
    summary = RunSummary(
        workload="mahjong", size="tiny", target=target, world_size=devices, batch_size_per_device=batch // devices,
        global_batch=batch, synthetic_data=False, num_workers=1, threads=1, first_step=0, last_step=steps,
        samples=steps * batch, wall_s=train_s, paused_s=paused, end_to_end_samples_per_s=batch / step_s,
        steady_samples_per_s=batch / step_s, samples_per_s_per_device=batch / step_s / devices, step_time_s=step_s,
        data_wait_fraction=0.0, data_wait_fraction_worst_rank=0.0, steady_data_wait_fraction=None, h2d_s_per_step=0.0,
        final_loss=1.0, validation=None, bench_samples_per_s=None, io_efficiency=None, stopped_by_signal=False,
        torch_version="2", time_to_target=record, noise_scale={"policy": noise_last_quarter}, startup_s=startup_s,
        workload_sha256="abc")
    return TrainRun(summary, Source(f"runs/{name}/summary.json"), {}, metrics=tuple(metrics))


def inputs(benches: list[Read], runs: list[TrainRun]) -> PlanInputs:
    return PlanInputs(bench=benches, runs=runs, settings=None, study_runs=[], study_batches=[], fit=None,
                      identity=Identity("mahjong", "abc", "tiny"), until=GOAL, steps_size="tiny")


def predicted(benches: list[Read], runs: list[TrainRun], targets=(EAGER,), devices=(1,), batches=(64,),
              schedules=("fixed",)) -> dict[str, object]:
    plan = inputs(benches, runs)
    rows = plan_rows(plan, PlanGrid(tuple(targets), tuple(devices), tuple(batches), tuple(schedules)), "plan",
                     steps_model(plan))
    return {row.config: row for row in rows}


# --- the steps from one run ------------------------------------------------------------------------

def test_one_run_gives_s_min_and_e_min_through_its_own_steps_with_its_noise_scale_near_the_goal():
    """S0 = 100 steps at B0 = 64 and B_noise = 64 near the goal: S_min = 100 / (1 + 64/64) = 50,
    E_min = 50 x 64. The summary's noise scale over the last quarter (999) is not the one near the goal."""
    model = steps_model(inputs([], [run(noise=64.0, noise_last_quarter=999.0)]))
    assert (model.fit.s_min, model.fit.e_min) == (pytest.approx(50.0), pytest.approx(3200.0))
    assert model.steps(64) == pytest.approx(100.0)  # through the run's own steps
    assert model.steps(256) == pytest.approx(62.5)
    assert "B_noise 64 near the goal (the noise-scale row of step 100" in model.source


def test_an_unresolved_noise_scale_with_a_lower_bound_bounds_the_steps_between_it_and_perfect_scaling():
    """At least 192 near the goal: at 4 x B0 the steps lie between perfect scaling through the run
    (100 / 4) and the model at 192 (S_min = 25, 25 (1 + 192 / 256))."""
    model = noise_model(100.0, 64, NoiseReading(None, 192.0, 100, "row 9"), "what", "through")
    assert not isinstance(model, str)
    assert model.steps(256) == pytest.approx(43.75)
    assert model.interval(256) == [pytest.approx(25.0), pytest.approx(43.75)]
    assert "unresolved (row 9): at least 192" in model.note
    refusal = noise_model(100.0, 64, NoiseReading(None, None, 100, "row 9"), "what", "through")
    assert isinstance(refusal, str) and "is unresolved (|G|^2 within its noise of 0) and bounds nothing" in refusal


def _unresolved_before_the_goal(tmp_path: Path) -> Path:
    """A committed run whose last noise-scale window before its goal resolved no B_simple."""
    base = tmp_path / "base"
    shutil.copytree(RESULTS / "plan_charlm" / "checks" / "cpu-eager-fp32-1-8", base)
    lines = [json.loads(line) for line in (base / "metrics.jsonl").read_text().splitlines()]
    last = max(index for index, row in enumerate(lines) if row["kind"] == "noise-scale" and row["step"] <= 768)
    lines[last]["b_simple_avg"] = None
    (base / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in lines))
    return base


def test_an_unresolved_window_before_the_goal_reads_the_run_s_last_quarter_where_that_resolved(capsys, tmp_path: Path):
    """One window's |G|^2 is often within its noise of 0: where the summary's reading over the last
    quarter of the run resolved, the plan predicts with it (and says so), not at a window's bound."""
    from trainspeed.cli import main

    base = _unresolved_before_the_goal(tmp_path)
    quarter = json.loads((base / "summary.json").read_text())["noise_scale"]["lm"]
    assert main(["plan", str(RESULTS / "plan_bench_charlm.jsonl"), str(base)]) == 0
    said = capsys.readouterr().out
    assert f"with B_noise {quarter:,.0f} near the goal (the summary of {base / 'summary.json'} (last quarter of its " \
           "steps); the window before the goal, step" in said


def test_an_unresolved_noise_scale_near_the_goal_without_a_bound_is_refused_in_one_line(cli_error, tmp_path: Path):
    """The window before the goal unresolved, and the summary without a reading of its own."""
    base = _unresolved_before_the_goal(tmp_path)
    summary = json.loads((base / "summary.json").read_text())
    summary["noise_scale"] = None
    (base / "summary.json").write_text(json.dumps(summary))
    error = cli_error("plan", str(RESULTS / "plan_bench_charlm.jsonl"), str(base))
    assert f"plan: the noise scale of run {base / 'summary.json'} near its goal" in error
    assert "is unresolved (|G|^2 within its noise of 0) and bounds nothing" in error


# --- start-up, validation and the committed run -------------------------------------------------------

def test_a_plan_from_one_run_counts_its_start_up_and_its_validations():
    """100 steps at 10 ms, a validation every 20 steps (1,280 samples) of 0.5 s, 3 s of start-up: the
    run itself is predicted at what it took, start-up included."""
    row = predicted([bench(EAGER, 64, 0.01)], [run()])["cpu:eager:fp32/1/64"]
    assert (row.steps_trained, row.validations) == (100, 5)
    assert row.overhead_s == 3.0 and row.validation_s == pytest.approx(0.5)
    assert row.predicted_s == pytest.approx(3.0 + 100 * 0.01 + 5 * 0.5)


@pytest.mark.parametrize("workload, config, base", [
    ("charlm", "cpu:eager:fp32/1/8", "cpu-eager-fp32-1-8"),
    ("mahjong", "cpu:eager:fp32/2/128", "cpu-eager-fp32-2-128"),
])
def test_a_committed_run_to_the_goal_predicts_its_own_command_with_start_up_and_validation(capsys, tmp_path: Path,
                                                                                           workload, config, base):
    """Each committed check run met the goal and measured its noise scale: planned from it alone,
    as the docs allow, its own configuration is predicted within 25% of the whole command it took.
    The plan once left out start-up, validation and compilation here, and predicted 0.60x and
    0.57x of these commands."""
    from trainspeed.cli import main

    run_dir = RESULTS / f"plan_{workload}" / "checks" / base
    devices, batch = config.split("/")[1:]
    out = tmp_path / "plan.jsonl"
    assert main(["plan", str(RESULTS / f"plan_bench_{workload}.jsonl"), str(run_dir), "--devices", devices,
                 "--global-batches", batch, "--out", str(out)]) == 0
    row = next(row for row in map(json.loads, out.read_text().splitlines()) if row["config"] == config)
    summary = json.loads((run_dir / "summary.json").read_text())
    checked = next(json.loads(line) for line in (RESULTS / f"plan_{workload}.jsonl").read_text().splitlines()
                   if '"plan-check"' in line and json.loads(line)["config"] == config)
    assert row["overhead_s"] == pytest.approx(summary["startup_s"])
    assert row["validations"] == len([1 for line in (run_dir / "metrics.jsonl").read_text().splitlines()
                                      if json.loads(line)["kind"] == "val"])
    assert row["validation_s"] > 0
    assert 0.75 <= checked["measured_s"] / row["predicted_s"] <= 1.25, (checked["measured_s"], row["predicted_s"])


# --- the step time in micro-batches -----------------------------------------------------------------

def test_a_step_in_micro_batches_costs_what_the_bench_measured_at_its_slices():
    """The base run steps 64 in 2 micro-batches of 32 at 0.01 s: 6,400 samples/s, 0.8 of the bench's
    8,000 at 32 (not 0.5 of its 12,800 at 64). Batch 128 in slices of 64 then steps in
    128 / 12,800 / 0.8 = 0.0125 s, and the base run's own batch in its own 0.01 s. Without the
    slice's bench row, the whole batch's stands in for it, and the step time says so."""
    benches = [bench(EAGER, 32, 0.004), bench(EAGER, 64, 0.005), bench(EAGER, 128, 0.008)]
    rows = predicted(benches, [run(micro_batches=2)], batches=(64, 128))
    own, larger = rows["cpu:eager:fp32/1/64"], rows["cpu:eager:fp32/1/128"]
    assert own.step_s == pytest.approx(0.01) and larger.step_s == pytest.approx(0.0125)
    assert "at 64/device (a step of 128 in 2 micro-batches of 64)" in larger.step_s_from
    assert "0.80 of the bench" in larger.step_s_from
    without = predicted([bench(EAGER, 32, 0.004), bench(EAGER, 128, 0.008)], [run(micro_batches=2)],
                        batches=(128,))["cpu:eager:fp32/1/128"]
    assert without.step_s == pytest.approx(0.008 / 0.8)
    assert "no bench row at 64, so the whole batch's" in without.step_s_from


def test_a_run_that_measured_one_step_in_k_stepped_whole_batches_in_the_others():
    """Measured one step in 32 over 2 micro-batches, the base run stepped 64 whole in the other 31:
    its 0.01 s is 0.5 of the bench's 0.005 at 64 (its measured steps and its IO in that factor), and
    batch 128 costs the bench at 128, not twice that at 64."""
    benches = [bench(EAGER, 32, 0.004), bench(EAGER, 64, 0.005), bench(EAGER, 128, 0.008)]
    rows = predicted(benches, [run(micro_batches=2, measure_every=32)], batches=(64, 128))
    own, larger = rows["cpu:eager:fp32/1/64"], rows["cpu:eager:fp32/1/128"]
    assert own.step_s == pytest.approx(0.01) and larger.step_s == pytest.approx(0.008 / 0.5)
    assert "micro-batches" not in larger.step_s_from and "0.50 of the bench" in larger.step_s_from


def test_an_auto_run_of_one_rank_steps_in_micro_batches_and_several_ranks_do_not():
    """A one-rank auto run reads its noise scale over 2 micro-batches, so each batch it reaches costs
    the bench at half of it; on 2 ranks each rank's gradient is a slice already, so the whole
    per-device batch's row holds."""
    benches = [bench(EAGER, size, 0.001 * size ** 0.5) for size in (16, 32, 64, 128, 256)]
    one = predicted(benches, [run(micro_batches=2, noise=GROWING)], batches=(64,), schedules=("auto",))
    auto = next(row for row in one.values() if row.schedule == "auto")
    assert "micro-batches of 32" in auto.step_s_from
    two = predicted(benches, [run(micro_batches=2, noise=GROWING)], devices=(2,), batches=(64,), schedules=("fixed",))
    assert "micro-batches" not in two["cpu:eager:fp32/2/64"].step_s_from


# --- compilations ---------------------------------------------------------------------------------

def test_a_compiled_run_counts_its_micro_batch_graph_in_place_of_the_whole_batch_s_and_its_validation():
    """One rank, 2 micro-batches of 32: its forward and backward run on the slices only, so the run
    compiles the graph at 32 (the bench's first step there, 5 s beyond steady) and not the one at 64
    (8 s); and its validation graph at 64 (a compiled run's first validation, 1.5 s beyond the
    others): 6.5 s. Without micro-batches, the graph at 64."""
    compiled = run(target=COMPILED, step_s=0.005, first_validation_extra_s=1.5, micro_batches=2, name="compiled")
    benches = [bench(EAGER, 64, 0.01), bench(COMPILED, 64, 0.005, first_step_s=8.005),
               bench(COMPILED, 32, 0.004, first_step_s=5.004)]
    row = predicted(benches, [run(micro_batches=2), compiled], targets=(EAGER, COMPILED))["cpu:compile:fp32/1/64"]
    assert [(item.graph, item.batch, item.seconds) for item in row.compilations] == [
        ("micro-batch", 32, pytest.approx(5.0)), ("validation", 64, pytest.approx(1.5))]
    assert row.compile_s == pytest.approx(6.5)
    assert row.predicted_s == pytest.approx(3.0 + 6.5 + 100 * 0.005 + 5 * 0.5)
    whole = predicted(benches, [run(), run(target=COMPILED, step_s=0.005, first_validation_extra_s=1.5,
                                           name="compiled")], targets=(EAGER, COMPILED))["cpu:compile:fp32/1/64"]
    assert [(item.graph, item.batch) for item in whole.compilations] == [("training", 64), ("validation", 64)]


def test_a_run_that_measured_one_step_in_k_compiles_both_graphs_as_its_first_window_did():
    """Measured one step in 4 over 2 micro-batches, the compiled base run compiled its whole step and
    its step in slices in its first window (12 s beyond steady, where the bench's first step at 64
    is 5 s beyond): its own batch is predicted with those 12 s, and batch 128 with them too, said
    to be assumed there. Without such a run, the bench rows at 128 and at 64 (the slice) each."""
    benches = [bench(COMPILED, 64, 0.005, first_step_s=5.005), bench(COMPILED, 128, 0.008, first_step_s=6.008)]
    base = run(target=COMPILED, step_s=0.005, first_window_extra_s=12.0, micro_batches=2, measure_every=4)
    rows = predicted(benches, [base], targets=(COMPILED,), batches=(64, 128))
    own, larger = rows["cpu:compile:fp32/1/64"], rows["cpu:compile:fp32/1/128"]
    assert [(item.graph, item.batch, item.seconds) for item in own.compilations if item.graph != "validation"] == [
        ("training", 64, pytest.approx(12.0))]
    training = [item for item in larger.compilations if item.graph != "validation"]
    assert [(item.graph, item.batch, item.seconds) for item in training] == [("training", 128, pytest.approx(12.0))]
    assert "at 64/device (with its step in 2 micro-batches), assumed at 128" in training[0].source
    from trainspeed.plan.compiles import compilations

    no_compiled_run = compilations(inputs(benches, [run()]), COMPILED, [128], validates=False, sliced=2)
    assert [(item.graph, item.batch, item.seconds) for item in no_compiled_run] == [
        ("training", 128, pytest.approx(6.0)), ("micro-batch", 64, pytest.approx(5.0))]


def test_a_run_s_first_window_at_another_batch_is_shifted_by_what_the_bench_says_the_graphs_add():
    """The bench compiles the step in 5 s at 64, 6 s at 128 and 4 s at 32 (the slice of 64): a run
    at 128 that also measures in slices of 64 compiles 6 + 5 = 11 s where the base run at 64
    compiled 5 + 4 = 9, so the base run's 12 s window stands for 14 s there. (On the TPU the window
    once stood unshifted for batch 1,024, whose graphs compile in 17 s against 9 at 64, and the
    checks there ran 1.36x the prediction.) A shift that would take it below 0 stops at 0."""
    benches = [bench(COMPILED, 64, 0.005, first_step_s=5.005), bench(COMPILED, 128, 0.008, first_step_s=6.008),
               bench(COMPILED, 32, 0.004, first_step_s=4.004)]
    base = run(target=COMPILED, step_s=0.005, first_window_extra_s=12.0, micro_batches=2, measure_every=4)
    larger = predicted(benches, [base], targets=(COMPILED,), batches=(64, 128))["cpu:compile:fp32/1/128"]
    (training,) = [item for item in larger.compilations if item.graph == "training"]
    assert training.seconds == pytest.approx(14.0)
    assert "+2.0 s for 128/device: its bench rows' compiles at 128 and 64 less those at 64 and 32" in training.source
    cheap = [bench(COMPILED, 64, 0.005, first_step_s=5.005), bench(COMPILED, 32, 0.004, first_step_s=20.004),
             bench(COMPILED, 128, 0.008, first_step_s=1.008)]
    shrunk = predicted(cheap, [base], targets=(COMPILED,), batches=(64, 128))["cpu:compile:fp32/1/128"]
    assert [item.seconds for item in shrunk.compilations if item.graph == "training"] == [0.0]


def test_a_runs_first_graph_pays_the_compilers_start_up_that_a_later_bench_row_did_not():
    """One bench process compiled 8 (33 s beyond its steady step: its first compilation, with the
    compiler's start-up), then 32 and 128 (16 s and 17 s). A run of 128 is a process of its own:
    its training graph costs 17 s plus the 33 - 16.5 = 16.5 s of start-up; its validation graph,
    compiled after it, does not. Rows that do not say their order (older ones) are taken as they
    are, and so is a bench process's first row."""
    from trainspeed.plan.compiles import compilations, compiler_start_up

    def ordered(batch: int, first_step_s: float, before: int) -> Read:
        read = bench(COMPILED, batch, 0.01, first_step_s=first_step_s + 0.01)
        return Read(dataclasses.replace(read.row, compiles_before=before), read.source, {})

    benches = [ordered(8, 33.0, 0), ordered(32, 16.0, 1), ordered(128, 17.0, 2)]
    plan = inputs(benches, [run()])
    assert compiler_start_up(plan, "r") == pytest.approx(16.5)
    (training,) = compilations(plan, COMPILED, [128], validates=False)
    assert training.seconds == pytest.approx(17.0 + 16.5) and "16.5 s of the compiler's start-up" in training.source
    (first,) = compilations(plan, COMPILED, [8], validates=False)
    assert first.seconds == pytest.approx(33.0)
    growing = compilations(plan, COMPILED, [32, 128], validates=False)
    assert [item.seconds for item in growing] == [pytest.approx(16.0 + 16.5), pytest.approx(17.0)]
    older = [bench(COMPILED, batch, 0.01, first_step_s=seconds + 0.01) for batch, seconds in ((8, 33.0), (128, 17.0))]
    assert compiler_start_up(inputs(older, [run()]), "r") is None
    (as_it_is,) = compilations(inputs(older, [run()]), COMPILED, [128], validates=False)
    assert as_it_is.seconds == pytest.approx(17.0)


def test_a_compilation_nothing_measured_is_not_measured_never_0_and_the_time_says_at_least():
    from trainspeed.plan.plan import table, verdict

    rows = predicted([bench(COMPILED, 64, 0.005, first_step_s=8.005)], [run()], targets=(COMPILED,))
    row = rows["cpu:compile:fp32/1/64"]
    assert [(item.graph, item.seconds) for item in row.compilations] == [("training", pytest.approx(8.0)),
                                                                          ("validation", None)]
    assert "no run of cpu:compile:fp32 validated twice" in row.compilations[1].source
    assert "| >= " in table(list(rows.values())) and "8.0 + 1 not measured" in table(list(rows.values()))
    assert "left out of its time: validation graph at 64/device: not measured" in verdict(list(rows.values()))


def test_a_validation_graph_no_run_compiled_at_a_batch_is_the_nearest_batch_s_assumed_there():
    """The committed TPU base run validated at 64/device: the plan of 128 and 256 counts that
    validation graph's compile at their batches (once left out: the checks there ran 1.1-1.25x)."""
    from trainspeed.plan.compiles import compilations
    from trainspeed.plan.inputs import read_plan_inputs

    plan = read_plan_inputs([RESULTS / "tpu_plan_check_bench.jsonl", RESULTS / "tpu_plan_check_b64"])
    (at_64,) = [item for item in compilations(plan, "jax:jit:fp32", [64]) if item.graph == "validation"]
    assert at_64.seconds is not None and at_64.seconds > 0 and "assumed" not in at_64.source
    for batch in (128, 256):
        (borrowed,) = [item for item in compilations(plan, "jax:jit:fp32", [batch]) if item.graph == "validation"]
        assert borrowed.seconds == at_64.seconds and borrowed.source.endswith(f"at 64/device, assumed at {batch}")


def test_a_growing_batch_compiles_every_graph_again_at_every_batch_it_reaches():
    benches = [bench(COMPILED, batch, 0.001 * batch / 16, first_step_s=2.0) for batch in (16, 32, 64, 128)]
    row = predicted(benches, [run(target=COMPILED, batch=16, noise=GROWING)], targets=(COMPILED,), batches=(16, 128),
                    schedules=("auto",))
    (auto,) = row.values()
    reached = sorted({phase.global_batch for phase in auto.phases})
    assert len(reached) > 1
    # one rank: auto reads its noise scale over 2 micro-batches, so each batch's step compiles at half of it
    assert sorted(item.batch for item in auto.compilations if item.graph == "micro-batch") == [
        batch // 2 for batch in reached]
    assert sorted(item.batch for item in auto.compilations if item.graph == "validation") == reached


# --- the interval ---------------------------------------------------------------------------------

def test_the_interval_holds_the_spread_of_the_step_time_where_the_steps_have_none():
    """Steps with no spread (a model of no draws and no seeds), trained steps rounded to a
    validation: the interval is a point. With the bench's windows spread it holds their resampled
    median's spread, and says so."""
    from trainspeed.plan.model import Overheads, predict
    from trainspeed.plan.steps import StepsModel
    from trainspeed.stats import StepsFit

    model = StepsModel(StepsFit(50.0, 3200.0), [], "one point")
    costs = Overheads(0.0, 0.5, 1280, EAGER, 1, "run")
    flat = predict(inputs([bench(EAGER, 64, 0.01)], []), model, costs, EAGER, 1, 64)
    assert flat.predicted_s_ci95[0] == flat.predicted_s_ci95[1]
    assert "one point: no input it draws varied" in flat.interval_from
    windows = [0.008, 0.009, 0.010, 0.011, 0.012]
    spread = predict(inputs([bench(EAGER, 64, 0.01, window_step_s=windows)], []), model, costs, EAGER, 1, 64)
    low, high = spread.predicted_s_ci95
    assert low < spread.predicted_s < high
    assert high - low > 100 * 0.001  # the step's median moves between the windows' by at least 1 ms per step
    assert "draws the step time (the bench's timed windows" in spread.interval_from


def test_a_base_runs_steps_spread_as_two_seeds_do_where_the_steps_were_counted_once():
    """One run gives the steps once: the interval holds another seed's steps (the base run's seed
    and the check's, each at the committed studies' scatter), not the step time's spread alone."""
    from trainspeed.plan.steps_spread import COMMITTED_STUDIES

    row = predicted([bench(EAGER, 64, 0.01)], [run(startup_s=None)])["cpu:eager:fp32/1/64"]
    low, high = row.steps_ci95
    spread = 2.09 * 2**0.5 * COMMITTED_STUDIES.log_sd  # t(0.975, 19) x sqrt(2) x the seeds' log sd
    assert low == pytest.approx(100.0 * np.exp(-spread), rel=0.05)
    assert high == pytest.approx(100.0 * np.exp(spread), rel=0.05)
    assert row.predicted_s_ci95[0] < row.predicted_s < row.predicted_s_ci95[1]
    assert "the base run's seed and the check's" in row.interval_from and not row.extrapolated


def test_a_batch_more_than_twice_the_base_runs_is_extrapolated_and_bounded_by_perfect_scaling_and_no_gain():
    """The base run tried its learning-rate rule at 64 only: 128 is within a doubling of it, 256
    is not. There the steps are bounded, not predicted: from perfect scaling (100 x 64 / 256 = 25)
    to no gain over the base run (100), each at two seeds' scatter, and the row and the verdict
    say so. Without the bounds 256 took a tight interval about the model's 62.5 steps."""
    from trainspeed.plan.plan import verdict

    benches = [bench(EAGER, batch, 0.01 * batch / 64) for batch in (64, 128, 256)]
    plan = inputs(benches, [run(startup_s=None)])
    rows = plan_rows(plan, PlanGrid((EAGER,), (1,), (64, 128, 256)), "plan", steps_model(plan))
    by_config = {row.config: row for row in rows}
    near, far = by_config["cpu:eager:fp32/1/128"], by_config["cpu:eager:fp32/1/256"]
    assert not near.extrapolated and near.extrapolated_why is None
    assert far.extrapolated and "batch 256 lies more than 2x from the base run's batch (64)" in far.extrapolated_why
    assert far.steps == pytest.approx(62.5)
    low, high = far.steps_ci95
    assert 25.0 * 0.6 < low < 25.0 and 100.0 < high < 100.0 * 1.6  # the bounds, at two seeds' scatter
    assert near.steps_ci95[1] - near.steps_ci95[0] < 0.6 * (high - low)
    assert "extrapolated: batch 256" in far.interval_from
    assert "extrapolated, 1 of 3 (cpu:eager:fp32/1/256): their steps are bounds, not predictions" in verdict(rows)
    assert [line.split("|")[-2].strip() for line in table(rows).splitlines()[2:]].count("extrapolated") == 1


def test_the_noise_scale_near_the_goal_is_drawn_from_its_windows_each_at_its_standard_error():
    """B_noise 64 in every window of the last quarter, |G|^2 = 1 +- 0.1: drawn, B_noise = 64 / |G|^2
    spreads about 64 by about 20% either way, and so do the steps at another batch; through the
    run's own steps at its batch, every draw gives its 100 steps."""
    model = steps_model(inputs([], [run(noise=64.0)]))
    assert len(model.draws) > 100 and "noise-scale windows of the last quarter" in model.spread
    b_noise = np.array([draw.b_crit for draw in model.draws])
    assert np.percentile(b_noise, 2.5) == pytest.approx(64 / 1.2, rel=0.05)
    assert np.percentile(b_noise, 97.5) == pytest.approx(64 / 0.8, rel=0.05)
    assert model.interval(64) == [pytest.approx(100.0), pytest.approx(100.0)]
    low, high = model.interval(128)
    assert low < model.steps(128) < high


def test_auto_from_critical_batch_rows_doubles_where_the_runs_noise_scale_says_not_the_critical_batch():
    """`train --batch-schedule auto` reads its own noise scale: a plan given critical-batch rows
    takes their critical batch for the steps and the run's noise scale for where auto doubles. With
    a critical batch of 512 and a noise scale of 20 the run stays at 16; it once doubled at once."""
    from trainspeed.plan.critical_batch import CriticalBatchPoint
    from trainspeed.plan.steps import run_profile

    base = run(batch=16, noise=20.0)
    points = tuple(CriticalBatchPoint(samples, 512.0, False, f"critical-batch study rows.jsonl:{line}")
                   for samples, line in ((400.0, 3), (800.0, 4)))
    profile = run_profile(base, 0.8, points)
    assert profile is not None and {piece.level for piece in profile.pieces} == {512.0}
    assert {piece.measured for piece in profile.pieces} == {20.0}
    plan = dataclasses.replace(inputs([bench(EAGER, batch, 0.001) for batch in (8, 16, 32, 64, 128)], [base]),
                               critical_points=points)
    rows = plan_rows(plan, PlanGrid((EAGER,), (1,), (16, 256), ("fixed", "auto")), "plan", steps_model(plan))
    auto = next(row for row in rows if row.schedule == "auto")
    assert [phase.global_batch for phase in auto.phases] == [16]
    from trainspeed.plan.plan import verdict

    said = verdict(rows)  # the rule the auto rows predict, which a run follows only with its step times off
    assert "auto rows predict `train --batch-schedule auto --auto-step-times off`" in said
    assert "--auto-step-times" not in verdict([row for row in rows if row.schedule == "fixed"])


def test_the_bench_rows_scatter_about_their_curve_is_drawn_for_each_row_and_cancels_at_the_runs_own_row():
    """Rows at 16 .. 256 on a straight line in log-log but 32 at e^0.1 above it and 128 at e^0.1 below:
    the scatter is the rows against their neighbours' line. A step at the base run's own batch is
    its run's (the row's draw cancels in the efficiency); at another batch the two rows' draws are
    its spread. Three rows measure no scatter."""
    from trainspeed.plan.bench_scatter import bench_scatter
    from trainspeed.plan.model import step_time

    off = {32: np.exp(0.1), 128: np.exp(-0.1)}
    benches = [bench(EAGER, batch, batch / (1000.0 * batch**0.5 * off.get(batch, 1.0))) for batch in (16, 32, 64, 128, 256)]
    scatter = bench_scatter(benches, EAGER)
    assert scatter is not None and scatter.residuals == 3
    residuals = [0.1, 0.0, -0.1]  # 32, 64 and 128 against the line through their neighbours (64 on it)
    expected = np.sqrt(sum(value**2 for value in residuals) / (3 * (1 + 0.5**2 + 0.5**2)))
    assert scatter.log_sd == pytest.approx(expected)
    assert bench_scatter(benches[:3], EAGER) is None
    plan = inputs(benches, [run(startup_s=None)])
    generator = np.random.default_rng(0)
    own, other = step_time(plan, EAGER, 1, 64, generator), step_time(plan, EAGER, 1, 256, generator)
    assert own.draws.min() == pytest.approx(own.draws.max())
    low, high = np.percentile(other.draws, [2.5, 97.5])
    assert high / low > np.exp(2 * 1.96 * expected)  # two rows' draws, each t-distributed
    assert "scatter of cpu:eager:fp32's bench rows" in other.scatter


def test_the_interval_holds_the_spread_of_the_start_up_of_the_runs_given():
    runs = [run(startup_s=3.0), *(dataclasses.replace(run(name=f"short{n}"), row=dataclasses.replace(
        run().row, time_to_target=None, startup_s=seconds)) for n, seconds in enumerate((2.0, 4.0, 5.0)))]
    row = predicted([bench(EAGER, 64, 0.01)], runs)["cpu:eager:fp32/1/64"]
    low, high = row.predicted_s_ci95
    assert low < high and "the start-up" in row.interval_from.split("; measured once")[0]


def test_a_start_up_measured_once_is_drawn_at_one_run_s_scatter_about_another_s():
    """The base run's start-up is one run's and the check's another: on a workload whose goal takes
    seconds it is most of the time, and an interval without its scatter misses the check."""
    from trainspeed.plan.model import BASE_AND_CHECK_START_UPS, Overheads

    once = Overheads(3.0, 0.0, 0, EAGER, 1, "base run", overhead_values=(3.0,))
    low, high = np.percentile(once.overhead_draws(1, np.random.default_rng(0)), [2.5, 97.5])
    spread = np.exp(1.97 * BASE_AND_CHECK_START_UPS.log_sd)  # t(0.975, 66)
    assert low == pytest.approx(3.0 / spread, rel=0.05) and high == pytest.approx(3.0 * spread, rel=0.05)
    given = Overheads(3.0, 0.0, 0, EAGER, 1, "no runs")  # a value no run measured: as given
    assert set(given.overhead_draws(1, np.random.default_rng(0))) == {3.0}
    row = predicted([bench(EAGER, 64, 0.01)], [run(startup_s=3.0)])["cpu:eager:fp32/1/64"]
    assert "the start-up (measured once: the one measured and the check's" in row.interval_from.split("; measured once: ")[0]


def test_a_study_whose_draws_round_to_one_validation_still_has_the_step_time_s_spread():
    """Every draw of the steps trains up to the same validation (a point before); the bench's windows spread."""
    from trainspeed.plan.model import Overheads, predict
    from trainspeed.plan.steps import StepsModel
    from trainspeed.stats import StepsFit

    model = StepsModel(StepsFit(50.0, 3200.0), [StepsFit(50.0 + d, 3200.0) for d in (-1.0, -0.5, 0.0)], "study")
    costs = Overheads(2.0, 0.5, 6400, EAGER, 1, "study")
    plain = predict(inputs([bench(EAGER, 64, 0.01)], []), model, costs, EAGER, 1, 64)
    assert plain.predicted_s_ci95[0] == plain.predicted_s_ci95[1]  # every draw: 100 steps, 1 validation
    windowed = predict(inputs([bench(EAGER, 64, 0.01, window_step_s=[0.009, 0.01, 0.011])], []), model, costs, EAGER, 1, 64)
    assert windowed.predicted_s_ci95[0] < windowed.predicted_s_ci95[1]


# --- a batch that grows ---------------------------------------------------------------------------

def test_a_growing_batch_doubles_once_two_readings_in_a_row_say_the_doubled_batch_scales():
    """Segments of 5 optimal steps at critical batches 100, 100, 400 x 4, from 32 up to 512: the
    batch doubles at the second reading of each pair that says 2B <= b (one doubling at a time),
    and each segment takes 5 (1 + b / B) steps at the batch it runs at."""
    segments = [Segment(5.0, b, b) for b in (100.0, 100.0, 400.0, 400.0, 400.0, 400.0)]
    phases = auto_phases(segments, 32, 512)
    assert [(phase.global_batch, phase.steps) for phase in phases] == [
        (32, pytest.approx(5 * (1 + 100 / 32))),
        (64, pytest.approx(5 * (1 + 100 / 64) + 5 * (1 + 400 / 64))),
        (128, pytest.approx(2 * 5 * (1 + 400 / 128))),
        (256, pytest.approx(5 * (1 + 400 / 256)))]
    assert [phase.global_batch for phase in auto_phases(segments, 32, 512, patience=1)] == [64, 128, 256]
    assert [phase.global_batch for phase in auto_phases(segments, 32, 128)] == [32, 64, 128]  # capped
    unresolved = auto_phases([Segment(5.0, 100.0, float("inf"))] * 4, 32, 512)
    assert [phase.global_batch for phase in unresolved] == [32, 64, 128]  # larger than any batch: it agrees


def test_the_profile_is_calibrated_to_the_fixed_model_and_a_batch_held_fixed_predicts_what_the_fixed_model_does():
    profile = Profile(64, (ProfilePiece(40.0, 30.0, 30.0), ProfilePiece(30.0, 90.0, 90.0),
                           ProfilePiece(30.0, 300.0, 300.0)), "run")
    segments = profile.calibrated(200.0, 50.0)
    progress = np.array([segment.progress for segment in segments])
    critical = np.array([segment.critical_batch for segment in segments])
    assert progress.sum() == pytest.approx(50.0)
    assert (progress * critical).sum() / progress.sum() == pytest.approx(200.0)
    assert critical / critical[0] == pytest.approx([1.0, 3.0, 10.0])  # the run's shape, scaled
    for batch in (32, 256, 4096):
        held = auto_phases(segments, batch, batch)
        assert sum(phase.steps for phase in held) == pytest.approx(50.0 * (1 + 200.0 / batch))


def test_a_plan_from_one_run_predicts_fixed_and_auto_configurations():
    benches = [bench(EAGER, batch, 0.001 * (1 + batch / 64)) for batch in (16, 32, 64, 128, 256)]
    rows = predicted(benches, [run(batch=16, noise=GROWING)], batches=(16, 256), schedules=("fixed", "auto"))
    assert set(rows) == {"cpu:eager:fp32/1/16", "cpu:eager:fp32/1/256", "cpu:eager:fp32/1/auto:16..256"}
    auto = rows["cpu:eager:fp32/1/auto:16..256"]
    assert auto.schedule == "auto" and auto.status == "predicted" and auto.phases[0].global_batch == 16


# --- checks of a plan without a study -------------------------------------------------------------

def base_run_with_settings(tmp_path: Path, monkeypatch, **settings) -> TrainRun:
    """The run above at global batch 64 with the settings it ran with (its train_config.json beside
    its summary): a LR rule, a warm-up of 10 steps, a validation every 20 steps on 4 batches."""
    from trainspeed.train.config import LRConfig, TrainConfig

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "base").mkdir(parents=True)
    config = TrainConfig(workload="mahjong", size="tiny", data="data", batch_size_per_device=64, steps=100, until=GOAL,
                         eval_every=20, eval_batches=4, noise_scale_micro_batches=2, out_dir="runs/base",
                         lr=LRConfig(base_lr=0.01, scaling="sqrt", reference_batch=64, warmup_steps=10), **settings)
    (tmp_path / "runs" / "base" / "train_config.json").write_text(config.to_json())
    return run(batch=64, noise=GROWING, micro_batches=2)


def test_a_check_without_a_study_trains_the_base_run_s_settings_at_the_configuration_s_batch(tmp_path, monkeypatch):
    """Fixed and auto checks of a plan from one base run: its LR rule, its warm-up and validations
    counted in samples (the same samples at every batch), its goal, on the check's seed, target and
    devices; auto over the range the plan predicted, in micro-batches on one rank."""
    from trainspeed.plan.check import check_commands, check_recipe, chosen
    from trainspeed.train.flags import config_of_command

    base = base_run_with_settings(tmp_path, monkeypatch)
    benches = [bench(target, batch, 0.001 * (1 + batch / 64)) for target in (EAGER, COMPILED)
               for batch in (16, 32, 64, 128)]
    plan = inputs(benches, [base])
    model = steps_model(plan)
    rows = plan_rows(plan, PlanGrid((EAGER, COMPILED), (1, 2), (32, 128), ("fixed", "auto")), "plan", model)
    picked = chosen(rows, ["cpu:compile:fp32/2/128", "cpu:eager:fp32/1/auto:32..128"])
    commands = check_commands(check_recipe(plan, model), picked, {row.config: tmp_path / row.config for row in picked},
                              seed=1000)
    fixed, auto = (config_of_command(commands[row.config]) for row in picked)
    assert (fixed.target, fixed.launch.nproc, fixed.batch_size_per_device, fixed.seed) == (COMPILED, 2, 64, 1000)
    assert (fixed.until, fixed.stop_at_target, fixed.checkpoint_every, fixed.workload, fixed.data) == (
        GOAL, True, 0, "mahjong", "data")
    assert (fixed.lr.base_lr, fixed.lr.scaling, fixed.lr.reference_batch) == (0.01, "sqrt", 64)
    assert (fixed.lr.warmup_steps, fixed.eval_every_samples, fixed.eval_batches) == (5, 20 * 64, 2)
    assert fixed.noise_scale_micro_batches == 1 and fixed.samples >= 100 * 64 and fixed.steps is None
    assert (auto.batch.schedule, auto.batch.global_batch_min, auto.batch.global_batch_max) == ("auto", 32, 128)
    assert (auto.target, auto.launch.nproc, auto.lr.warmup_steps, auto.eval_batches) == (EAGER, 1, 20, 8)
    assert auto.noise_scale_micro_batches == 2 and auto.steps is None and auto.samples >= 100 * 64


def test_a_check_without_a_study_needs_the_base_run_s_settings(tmp_path, monkeypatch):
    from trainspeed.errors import UsageError
    from trainspeed.plan.check import check_recipe

    monkeypatch.chdir(tmp_path)
    plan = inputs([bench(EAGER, 64, 0.01)], [run()])
    with pytest.raises(UsageError, match=r"run runs/base holds no train_config.json .*give a time-to-target study's rows, "
                                         r"or the base run's folder as `trainspeed train` wrote it"):
        check_recipe(plan, steps_model(plan))


def test_a_check_s_steps_to_the_crossing_lie_between_the_validations_around_it_in_samples():
    """A growing batch: 100 steps to 3,200 samples, 50 more to 9,600; the goal met halfway in samples
    between those validations was crossed at step 125, not at 6,400 samples over the last batch."""
    record = TimeToTargetRecord(
        until=GOAL, metric="accuracy", reached=True, step=150, samples=9600, value=0.9, train_s=1.0, wall_s=1.0,
        previous_step=100, previous_samples=3200, previous_value=0.7, previous_train_s=None, previous_wall_s=None,
        best_value=0.9, best_step=150, resumes=0, lost_train_s=0.0, lost_wall_s=0.0, global_batch=128, world_size=1,
        target=EAGER)
    assert record.crossing_step(0.8) == pytest.approx(125.0)
    assert dataclasses.replace(record, previous_step=None, previous_samples=None,
                               previous_value=None).crossing_step(0.8) == 150.0
    assert dataclasses.replace(record, reached=False, value=None).crossing_step(0.8) is None


def test_a_check_without_a_study_imports_a_users_module_only_where_the_user_names_it(tmp_path, monkeypatch):
    """The base run's settings name a module of the user's own: rows and settings are data, so the
    check runs it only with `--workload` naming it too, and refuses another workload than the run's."""
    import dataclasses as dc

    from trainspeed.errors import UsageError
    from trainspeed.plan.check import check_recipe, check_runnable

    base = base_run_with_settings(tmp_path, monkeypatch)
    plan = inputs([bench(EAGER, 64, 0.01)], [base])
    recipe = dc.replace(check_recipe(plan, steps_model(plan)), workload="my_module:Workload", data=None)
    with pytest.raises(UsageError, match=r"--check would import my_module:Workload, a module the base run's rows name"):
        check_runnable(plan, recipe, None)
    with pytest.raises(UsageError, match=r"--workload mahjong: the base run .* trained my_module:Workload"):
        check_runnable(plan, recipe, "mahjong")
    check_runnable(plan, recipe, "my_module:Workload")
    with pytest.raises(UsageError, match=r"--check trains on the base run's data data .*which is not here"):
        check_runnable(plan, check_recipe(plan, steps_model(plan)), None)


def test_a_check_trains_on_data_in_a_format_only_the_users_module_reads(tmp_path, monkeypatch):
    """The small CNN example reads one .npz file, no format of trainspeed's: its `train` takes it, and
    so does a check of a plan from its base run; a file its workload cannot open is refused."""
    import dataclasses as dc

    from child_commands import EXAMPLES

    from trainspeed.errors import UsageError
    from trainspeed.plan.check import check_recipe, check_runnable

    monkeypatch.syspath_prepend(str(EXAMPLES))
    from small_cnn_workload import write_dataset

    base = base_run_with_settings(tmp_path, monkeypatch)
    plan = inputs([bench(EAGER, 64, 0.01)], [base])
    workload, data = "small_cnn_workload:SmallCNNWorkload", write_dataset(tmp_path / "shapes.npz", samples=64)
    recipe = dc.replace(check_recipe(plan, steps_model(plan)), workload=workload, size="tiny", data=str(data))
    check_runnable(plan, recipe, workload)
    data.write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(UsageError, match=r"data .*shapes.npz .*which is not here \(.*shapes.npz: the workload "
                                         r"small_cnn_workload:SmallCNNWorkload cannot open it \(BadZipFile"):
        check_runnable(plan, recipe, workload)


def test_a_base_run_whose_batch_grew_is_refused_in_one_line_not_read_as_steps_of_its_last_batch(cli_error):
    """The committed auto run went 32 -> 256: its samples over its last batch are no steps of one
    batch, which the steps model goes through."""
    line = cli_error("plan", str(RESULTS / "plan_bench_mahjong.jsonl"), str(RESULTS / "auto_vs_fixed_mahjong_auto_run"),
                     "--devices", "1")
    assert "grew its batch (batch schedule auto: global batch 32 -> 64" in line
    assert "plan from a run that trained at one batch, or give a critical-batch study of it" in line


def test_a_check_says_whether_its_measured_time_lies_inside_its_interval():
    """The interval is what a check is read against: each check row records it (`inside`), and its
    line says it beside the ratio and the tolerance."""
    from trainspeed.plan.check import check_line, inside
    from trainspeed.plan.rows import PlanCheckRow

    assert inside([10.0, 20.0], 20.0) is True and inside([10.0, 20.0], 21.0) is False and inside(None, 5.0) is None
    row = PlanCheckRow(
        plan_id="p", config="cpu:eager:fp32/1/128", target=EAGER, devices=1, global_batch=128, workload="mahjong",
        size="tiny", until=GOAL, recommended=False, samples_per_s_pick=False, predicted_s=10.0,
        predicted_s_ci95=[6.0, 30.0], measured_s=14.0, ratio=1.4, within=False, tolerance=0.25, predicted_steps=62.5,
        measured_steps=80.0, predicted_step_s=0.1, measured_step_s=0.1, reached=True, seed=1000, run_dir="d",
        command="c", inside=True)
    assert "(ratio 1.40, outside ±25%, inside its 95% interval [6.0, 30.0])" in check_line(row)


def test_an_extrapolated_check_is_judged_by_its_interval_not_by_the_tolerance():
    """An extrapolated configuration's steps are bounds, not a prediction: its check row holds no
    verdict on the tolerance (`within` None), its line and the verdict give the interval and call
    the model's point what it is, and the report's column says which way its interval judged it.
    The run is a committed check of hf:gpt2, its plan row marked extrapolated."""
    from trainspeed.plan.check import check_line, check_row, mean_check_line
    from trainspeed.plan.plan import verdict
    from trainspeed.plan.report import PART, tolerance_verdict
    from trainspeed.plan.rows import PlanRow
    from trainspeed.report.reading import read_inputs
    from trainspeed.train.runs import read_run_summary

    run_dir = RESULTS / "named_plan_gpt2" / "checks" / "cpu-compile-fp32-1-128" / "seed-1000"
    plans = read_inputs([RESULTS / "named_plan_gpt2.jsonl"], (PART,)).of(PlanRow)
    (planned,) = [found.row for found in plans if found.row.config == "cpu:compile:fp32/1/128"]
    row = dataclasses.replace(planned, extrapolated=True, predicted_s_ci95=[100.0, 300.0])
    checked = check_row(row, read_run_summary(run_dir), run_dir, 182.3, 1000, 0.25, "c")
    assert checked.within is None and checked.inside is True and checked.ratio == pytest.approx(182.3 / planned.predicted_s)
    ratio = 182.3 / planned.predicted_s
    assert (f"measured 182.3 s, predicted {planned.predicted_s:,.1f} s (ratio {ratio:.2f}, "
            f"{'within' if abs(ratio - 1) <= 0.25 else 'outside'} ±25%, inside its 95% interval [100.0, 300.0]); "
            "extrapolated: its steps were bounded, not predicted, so the plan judges it by its interval: inside"
            ) in check_line(checked)
    # the steady step, its global batch over the run's steady samples/s, beside the predicted step
    summary = read_run_summary(run_dir)
    assert checked.steady_step_s == pytest.approx(128 / summary.steady_samples_per_s)
    assert (f"; steady step {checked.steady_step_s * 1e3:,.1f} ms against {planned.step_s * 1e3:,.1f} predicted"
            in check_line(checked))
    assert checked.measured_step_s > checked.steady_step_s  # the compilations are in the first
    assert tolerance_verdict(checked) == "extrapolated: by its interval, inside"
    slower = dataclasses.replace(checked, seed=1001, measured_s=320.0, inside=False)
    assert "measured 251.2 s (182.3, 320.0), predicted" in mean_check_line([checked, slower])
    assert "judges it by its interval: inside" in mean_check_line([checked, slower])
    assert tolerance_verdict(slower) == "extrapolated: by its interval, outside"
    best = dataclasses.replace(row, recommended=True, samples_per_s_pick=True)
    assert ("recommended: cpu:compile:fp32/1/128, extrapolated: 100.0 to 300.0 s (ranked by the model's point "
            f"{planned.predicted_s:,.1f} s") in verdict([best])


def test_rows_of_plans_before_the_extrapolation_was_said_still_read():
    """The committed plan and check rows have no `extrapolated` or `inside`: they read as not
    extrapolated, and not assessed."""
    from trainspeed.plan.report import PART
    from trainspeed.plan.rows import PlanCheckRow, PlanRow
    from trainspeed.report.reading import read_inputs

    read = read_inputs([RESULTS / "plan_checks_gpt2.jsonl"], (PART,))
    plans, checks = read.of(PlanRow), read.of(PlanCheckRow)
    assert plans and checks
    assert not any(found.row.extrapolated or found.row.extrapolated_why for found in plans)
    assert all(found.row.inside is None and not found.row.extrapolated for found in checks)
