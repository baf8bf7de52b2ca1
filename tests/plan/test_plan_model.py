"""The plan's prediction of time to a goal from rows: steps x step time + start-up + validation,
ranked, with the configurations whose rows are missing listed as not measured."""

import dataclasses

import numpy as np
import pytest

from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.plan.inputs import Identity, PlanInputs, _check_fits
from trainspeed.plan.model import steps_model
from trainspeed.plan.plan import PlanGrid, plan_rows, verdict
from trainspeed.report.inputs import Read
from trainspeed.rows import Source
from trainspeed.stats import bootstrap_fit
from trainspeed.studies.time_to_target.config import TimeToTargetConfig
from trainspeed.studies.time_to_target.rows import TimeToTargetFitRow, TimeToTargetRunRow, TimeToTargetSettingsRow
from trainspeed.train.runs import TrainRun
from trainspeed.train.rows import RunSummary, TimeToTargetRecord

S_MIN, B_CRIT = 50.0, 200.0


def bench(target: str, batch: int, samples_per_s: float, first_step_s: float | None = None) -> Read:
    row = ResultRow(run_id="r", timestamp="2026-01-01T00:00:00", workload="mahjong", size="tiny", target=target,
                    batch_size=batch, status="ok", samples_per_s=samples_per_s, step_time_s=batch / samples_per_s,
                    first_step_s=first_step_s, workload_sha256="abc")
    return Read(row, Source("bench.jsonl", 1), {})


def fit_row() -> Read:
    row = TimeToTargetFitRow(
        study_id="study", workload="mahjong", size="tiny", until="val/accuracy>=0.8", batches=[64, 256, 1024],
        left_out=[], s_min=S_MIN, s_min_ci95=[45.0, 55.0], e_min=S_MIN * B_CRIT, e_min_ci95=[9000.0, 11000.0],
        b_crit=B_CRIT, b_crit_ci95=[150.0, 250.0], draws=[[45.0, 9000.0], [55.0, 11000.0]] * 20, bootstrap_draws=40,
        b_simple=180.0, b_simple_per_batch={}, relative_rms=0.05, workload_sha256="abc")
    return Read(row, Source("study.jsonl", 9), {})


def test_the_plans_interval_on_the_steps_is_the_one_the_study_gives_the_same_draws():
    """The plan reads the draws a fit row keeps; over the same draws it prints the interval the
    study's own bootstrap prints (one percentile method for both)."""
    seeds = {64: [190.0, 206.0, 240.0], 256: [80.0, 88.0, 95.0], 1024: [58.0, 61.0, 70.0]}
    study = bootstrap_fit(seeds, draws=97)
    row = dataclasses.replace(fit_row().row, s_min=study.fit.s_min, e_min=study.fit.e_min,
                              draws=[[draw.s_min, draw.e_min] for draw in study.draws], bootstrap_draws=97)
    plan_inputs = dataclasses.replace(inputs([], []), fit=Read(row, Source("study.jsonl", 9), {}))
    model = steps_model(plan_inputs)
    for batch in (32, 64, 300, 1024, 4096):
        assert model.interval(batch) == list(study.steps_interval(batch))


def study_run(command_s: float, wall_s: float, train_s: float, validations: int) -> TimeToTargetRunRow:
    return TimeToTargetRunRow(
        study_id="study", run="b64", run_dir="r", purpose="seed", target="cpu:eager:fp32", nproc=1, global_batch=64,
        lr_factor=1.0, peak_lr=1e-3, seed=1, max_samples=65536, reached=True, outcome="", steps=100.0, samples=6400.0,
        validated_step=100, value=0.8, best_value=0.8, train_s=train_s, wall_s=wall_s, validations=validations,
        command_s=command_s, b_simple=None, noise_scale_method=None, end_to_end_samples_per_s=1.0, command="c")


def inputs(benches: list[Read], runs: list[TimeToTargetRunRow]) -> PlanInputs:
    config = TimeToTargetConfig(workload="mahjong", data="d", until="val/accuracy>=0.8", out="o",
                                global_batches=(64, 256, 1024), eval_every_samples=4096)
    settings = TimeToTargetSettingsRow(study_id="study", settings=config, workload="mahjong", size="tiny",
                                       until="val/accuracy>=0.8", metric="accuracy", base_lr=3e-4,
                                       base_lr_from="workload", reference_batch=512, command="c", total_s=1.0,
                                       workload_sha256="abc")
    return PlanInputs(bench=benches, runs=[], settings=settings, study_runs=runs, study_batches=[], fit=fit_row(),
                      identity=Identity("mahjong", "abc", "tiny"), until="val/accuracy>=0.8", steps_size="tiny")


def test_a_prediction_is_steps_times_step_time_plus_start_up_compilation_and_validation():
    benches = [bench("cpu:eager:fp32", 64, 6400.0, first_step_s=0.02), bench("cpu:compile:fp32", 64, 12800.0, 5.01)]
    # two runs of 2 s overhead and 0.5 s per validation: the check's start-up is one of them
    runs = [study_run(command_s=12.0, wall_s=10.0, train_s=9.0, validations=2)] * 2
    rows = plan_rows(inputs(benches, runs), PlanGrid(("cpu:eager:fp32", "cpu:compile:fp32"), (1,), (64,)), "plan")
    by_target = {row.target: row for row in rows}
    steps = S_MIN * (1 + B_CRIT / 64)  # 206.25 steps, 13,200 samples: the goal is met between validations 3 and 4
    trained, validations = 256, 4  # the run learns it only at validation 4, 16,384 samples
    eager = by_target["cpu:eager:fp32"]
    assert eager.steps == pytest.approx(steps)
    assert (eager.steps_trained, eager.validations) == (trained, validations)
    assert eager.predicted_s == pytest.approx(2.0 + trained * 0.01 + validations * 0.5)
    compiled = by_target["cpu:compile:fp32"]
    compiling = 5.01 - 0.005  # its first step beyond its steady one: the training graph's compilation
    assert compiled.compile_s == pytest.approx(compiling)
    assert [(item.graph, item.batch, item.seconds) for item in compiled.compilations] == [
        ("training", 64, pytest.approx(compiling)), ("validation", 64, None)]  # no run of it validated: not measured
    assert eager.compilations == []  # an eager target compiles nothing (its first step's excess is no compilation)
    assert compiled.predicted_s == pytest.approx(2.0 + compiling + trained * 0.005 + validations * 0.5)
    assert eager.recommended and not compiled.recommended and compiled.rank == 2
    assert eager.statistical_efficiency == pytest.approx(1 / (1 + 64 / B_CRIT))
    assert eager.goodput == pytest.approx(6400.0 / (1 + 64 / B_CRIT))
    low, high = eager.predicted_s_ci95  # the interval's low end is met at validation 3
    assert low == pytest.approx(2.0 + 192 * 0.01 + 3 * 0.5)
    assert high > eager.predicted_s  # one run's seed scatters its steps past the fit's to a later validation


@pytest.mark.parametrize("steps, batch, every, expected", [
    (206.25, 64, 4096, (256.0, 4)),  # between validations: up to the next one
    (192.0, 64, 4096, (192.0, 3)),  # on a validation: that one
    (10.0, 64, 4096, (64.0, 1)),  # before the first: the first
    (100.5, 128, 1000, (102.0, 13)),  # a cadence that is no multiple of the batch: the first step past it
    (100.5, 128, 0, (100.5, 0)),  # no cadence: the crossing's steps
])
def test_a_run_trains_and_validates_up_to_the_first_validation_at_or_past_the_crossing(steps, batch, every, expected):
    from trainspeed.plan.model import stopping_point

    assert stopping_point(steps, batch, every) == expected


def test_samples_per_second_alone_picks_the_largest_batch_which_the_plan_predicts_slower():
    benches = [bench("cpu:eager:fp32", 64, 2000.0), bench("cpu:eager:fp32", 256, 4000.0),
               bench("cpu:eager:fp32", 1024, 5000.0)]
    rows = plan_rows(inputs(benches, []), PlanGrid(("cpu:eager:fp32",), (1,), (64, 256, 1024)), "plan")
    pick = next(row for row in rows if row.samples_per_s_pick)
    best = next(row for row in rows if row.recommended)
    assert pick.global_batch == 1024 and best.global_batch == 256
    assert pick.vs_recommended > 1
    assert "samples/s alone would pick cpu:eager:fp32/1/1024" in verdict(rows)


def test_a_configuration_without_its_bench_row_is_not_measured_never_invented():
    rows = plan_rows(inputs([bench("cpu:eager:fp32", 64, 2000.0)], []),
                     PlanGrid(("cpu:eager:fp32",), (1, 2), (64, 256)), "plan")
    missing = [row for row in rows if row.status == "not measured"]
    assert {row.config for row in missing} == {"cpu:eager:fp32/1/256", "cpu:eager:fp32/2/64", "cpu:eager:fp32/2/256"}
    assert all(row.predicted_s is None and row.rank is None and "no bench row" in row.missing for row in missing)


def test_rows_of_another_workload_or_size_are_refused():
    plan = Identity("mahjong", "abc", "tiny")
    _check_fits(plan, Identity("mahjong", "abc", "tiny"), "here")
    with pytest.raises(UsageError, match="size base"):
        _check_fits(plan, Identity("mahjong", "abc", "base"), "bench.jsonl:3")
    with pytest.raises(UsageError, match="another definition"):
        _check_fits(plan, Identity("mahjong", "def", "tiny"), "bench.jsonl:3")


def test_starting_more_devices_costs_what_the_runs_of_each_count_measured():
    from trainspeed.plan.model import Overheads

    costs = Overheads(overhead_s=3.0, validation_s=0.5, eval_every_samples=4096, study_target="cpu:eager:fp32",
                      study_devices=1, source="study", startup_s={1: 2.0, 2: 6.0})
    assert costs.at(1) == (3.0, "study")
    two, why = costs.at(2)
    assert two == 7.0 and "+4.0 s to start 2 devices" in why
    eight, why = costs.at(8)
    assert eight == 3.0 and "assumed to cost the same" in why


def test_a_study_run_whose_wall_seconds_fall_short_of_its_training_costs_no_validation_time():
    """wall_s less than train_s (rows that do not fit together) once made validations save time."""
    from trainspeed.plan.model import overheads

    runs = [study_run(command_s=12.0, wall_s=8.0, train_s=10.0, validations=2)]
    assert overheads(inputs([], runs)).validation_s == 0.0


def _goal_run(b_noise: float) -> TrainRun:
    """A one-rank run of batch 64 that met the goal at 6,400 samples, with this noise scale."""
    record = TimeToTargetRecord(
        until="val/accuracy>=0.8", metric="accuracy", reached=True, step=100, samples=6400, value=0.8, train_s=9.0,
        wall_s=10.0, previous_step=None, previous_samples=None, previous_value=None, previous_train_s=None,
        previous_wall_s=None, best_value=0.8, best_step=100, resumes=0, lost_train_s=0.0, lost_wall_s=0.0,
        global_batch=64, world_size=1, target="cpu:eager:fp32")
    summary = RunSummary(
        workload="mahjong", size="tiny", target="cpu:eager:fp32", world_size=1, batch_size_per_device=64,
        global_batch=64, synthetic_data=False, num_workers=1, threads=1, first_step=0, last_step=100, samples=6400,
        wall_s=10.0, paused_s=1.0, end_to_end_samples_per_s=640.0, steady_samples_per_s=None,
        samples_per_s_per_device=640.0, step_time_s=0.1, data_wait_fraction=0.0, data_wait_fraction_worst_rank=0.0,
        steady_data_wait_fraction=None, h2d_s_per_step=0.0, final_loss=1.0, validation=None,
        bench_samples_per_s=None, io_efficiency=None, stopped_by_signal=False, torch_version="2",
        time_to_target=record, noise_scale={"net": b_noise})
    return TrainRun(summary, Source("runs/a/summary.json"), {})


def test_with_no_study_only_a_run_with_a_noise_scale_above_0_gives_the_steps():
    """A noise scale below 0 (its tr(Sigma) estimate below 0) once predicted fewer steps at a smaller
    batch, and steps below 0 there."""
    from trainspeed.plan.model import steps_model

    def plan_of(run: TrainRun) -> PlanInputs:
        return dataclasses.replace(inputs([], []), runs=[run], settings=None, fit=None)

    assert steps_model(plan_of(_goal_run(64.0))).steps(64) == pytest.approx(100.0)
    with pytest.raises(UsageError, match=r"near its goal .* is unresolved \(\|G\|\^2 within its noise of 0\) and "
                                         "bounds nothing"):
        steps_model(plan_of(_goal_run(-32.0)))


def test_with_no_study_a_summarys_unresolved_noise_scale_is_a_lower_bound_never_a_value():
    """A run's last quarter whose |G|^2 is within its noise of 0 gives only B_simple > N: the plan
    predicts at that bound, its interval running to perfect scaling, and says so; a resolved
    reading is the value, and a summary written before readings were assessed gives its value."""
    from trainspeed.gradients.rows import assess, summary_fields
    from trainspeed.plan.model import steps_model

    def run_of(readings: dict, name: str) -> TrainRun:
        row = dataclasses.replace(_goal_run(0.0).row, **summary_fields(readings))
        return TrainRun(row, Source(f"runs/{name}/summary.json"), {})

    def plan_of(*runs: TrainRun) -> PlanInputs:
        return dataclasses.replace(inputs([], []), runs=list(runs), settings=None, fit=None)

    bound = steps_model(plan_of(run_of({"net": assess(0.01, 530.0, 1.0)}, "u")))
    assert "B_noise at least 264 (unresolved near the goal)" in bound.source, bound.source
    assert bound.steps(64) == pytest.approx(100.0)  # through its run, with B_noise at the bound
    resolved = steps_model(plan_of(run_of({"net": assess(2.0, 128.0, 0.1)}, "r")))
    assert "B_noise 64 near the goal" in resolved.source, resolved.source
    older = steps_model(plan_of(_goal_run(64.0)))  # a summary written before: its value, not assessed
    assert "B_noise 64 near the goal" in older.source, older.source


def _batch_row(batch: int, steps: list[float]) -> "TimeToTargetBatchRow":
    from trainspeed.studies.time_to_target.rows import TimeToTargetBatchRow

    return TimeToTargetBatchRow(
        study_id="study", global_batch=batch, best_lr_factor=1.0, peak_lr=1e-3, lr_sweep={"1": 1.0},
        best_at_edge=False, extensions=0, seeds=list(range(len(steps))), reached=len(steps), outcome="",
        steps_per_seed=steps, steps_mean=sum(steps) / len(steps), steps_min_max=[min(steps), max(steps)],
        samples_mean=batch * sum(steps) / len(steps), samples_min_max=[batch * min(steps), batch * max(steps)],
        b_simple=None, wall_s_mean=1.0)


def test_one_runs_steps_scatter_as_the_studys_seeds_do_beyond_the_fits_interval_of_their_mean():
    """A check is one seed: its steps lie about the fit's mean by the scatter of the study's seeds at
    one batch (here a log sd of 0.1 over 2 x 2 degrees of freedom), which the fit's bootstrap of the
    mean does not hold. The model's own interval stays the study's."""
    rows = [_batch_row(64, [206.25 * 0.9, 206.25, 206.25 / 0.9]), _batch_row(256, [100.0 * 0.9, 100.0, 100.0 / 0.9])]
    plan = dataclasses.replace(inputs([bench("cpu:eager:fp32", 64, 6400.0)], []), study_batches=rows)
    model = steps_model(plan)
    assert model.seeds.degrees_of_freedom == 4 and model.seeds.log_sd == pytest.approx(0.1054, rel=1e-3)
    assert model.interval(64) == pytest.approx([S_MIN * 0.9 * (1 + B_CRIT / 64), S_MIN * 1.1 * (1 + B_CRIT / 64)],
                                               rel=0.02)
    low, high = model.run_interval(64)
    assert low < model.interval(64)[0] and high > model.interval(64)[1]
    assert high / model.steps(64) == pytest.approx(np.exp(2.776 * 0.1054), rel=0.15)  # t(0.975, 4) x log sd
    row = plan_rows(plan, PlanGrid(("cpu:eager:fp32",), (1,), (64,)), "plan")[0]
    assert row.steps_ci95 == pytest.approx([low, high])
    assert "study study's seeds at one batch (log sd 0.105, 4 degrees of freedom)" in row.interval_from


def test_a_batch_outside_the_studys_batches_is_extrapolated_inside_them_it_is_not():
    """The study tuned its rate at 64, 256 and 1,024: 300 lies between them; 4,096 lies beyond, where
    the steps are bounded by perfect scaling from 1,024 (S(1024) / 4) and no gain over it (S(1024))."""
    plan = inputs([bench("cpu:eager:fp32", batch, 6400.0) for batch in (300, 4096)], [])
    rows = {row.global_batch: row for row in plan_rows(plan, PlanGrid(("cpu:eager:fp32",), (1,), (300, 4096)), "plan")}
    assert not rows[300].extrapolated
    beyond = rows[4096]
    assert beyond.extrapolated and "batch 4,096 lies outside the study's batches (64-1,024)" in beyond.extrapolated_why
    at_1024 = S_MIN * (1 + B_CRIT / 1024)
    low, high = beyond.steps_ci95
    assert at_1024 / 4 * 0.7 < low < at_1024 / 4 and at_1024 < high < at_1024 * 1.4
