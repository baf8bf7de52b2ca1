"""The time-to-target study's batches: the LR sweep past an edge, a batch's seeds (their mean, and
the smallest and largest, which is what 2 or 3 seeds can say), rows of the older schema that held
them as an interval, and the table the study prints."""

import dataclasses
from pathlib import Path

import pytest

from trainspeed.rows import Source, parse_row, read_records, row_record
from trainspeed.studies.time_to_target.config import TimeToTargetConfig
from trainspeed.studies.time_to_target.rows import TimeToTargetBatchRow, TimeToTargetRunRow
from trainspeed.studies.time_to_target.study import StudyRecipe, batch_row, best_factor, fit_row, next_factor, table

REPO_ROOT = Path(__file__).resolve().parents[3]
from trainspeed.train.time_to_target import parse_goal

def run(factor: float, samples: float | None, batch: int = 64, seed: int = 0) -> TimeToTargetRunRow:
    return TimeToTargetRunRow(
        study_id="s", run=f"f{factor}", run_dir="r", purpose="lr sweep", target="cpu:eager:fp32", nproc=1,
        global_batch=batch, lr_factor=factor, peak_lr=1e-3 * factor, seed=seed, max_samples=4096,
        reached=samples is not None,
        outcome="", steps=None if samples is None else samples / batch, samples=samples, validated_step=None, value=None,
        best_value=None, train_s=1.0, wall_s=1.0, validations=1, command_s=2.0, b_simple=None, noise_scale_method=None,
        end_to_end_samples_per_s=100.0, command="trainspeed train")


def test_the_sweep_goes_past_the_edge_its_best_factor_lies_at_and_stops_inside():
    tried = [0.5, 1.0, 2.0]
    assert best_factor([run(0.5, 900.0), run(1.0, 800.0), run(2.0, 700.0)]) == 2.0
    assert next_factor(tried, 2.0) == 4.0
    assert next_factor(tried, 0.5) == 0.25
    assert next_factor(tried, 1.0) is None
    assert best_factor([run(0.5, None), run(1.0, None)]) is None
    assert next_factor(tried, None) is None


def recipe() -> StudyRecipe:
    config = TimeToTargetConfig(workload="mahjong", data="d", until="val/accuracy>=0.9", out="o",
                                global_batches=(64, 256), seeds=2, lr_factors=(1.0, 2.0), max_samples=4096)
    return StudyRecipe(config=config, size="tiny", goal=parse_goal(config.until), base_lr=1e-3, base_lr_from="workload",
                       reference_batch=64, identity={})


def test_a_batch_a_seed_of_which_misses_the_goal_says_so_and_is_left_out_of_the_fit():
    tuned = {64: [run(1.0, 900.0), run(2.0, 800.0)], 256: [run(1.0, 2048.0, 256), run(2.0, 1792.0, 256)]}
    seeds = {64: [tuned[64][1], run(2.0, 850.0, seed=1)], 256: [tuned[256][1], run(2.0, None, 256, seed=1)]}
    rows = [batch_row("s", recipe(), batch, tuned[batch], seeds[batch]) for batch in (64, 256)]
    assert rows[0].outcome == "reached by all 2 seeds" and rows[0].best_at_edge
    assert rows[1].outcome == "not reached within 4,096 samples by seed 1"
    assert rows[1].steps_mean is None and rows[1].reached == 1 and rows[1].steps_per_seed == [7.0, None]
    assert fit_row("s", recipe(), rows, seeds) is None  # one batch left: nothing to fit


def test_a_batch_no_factor_of_which_reaches_the_goal_has_no_best_factor():
    row = batch_row("s", recipe(), 64, [run(1.0, None), run(2.0, None)], [])
    assert row.best_lr_factor is None and row.outcome == "not reached within 4,096 samples at any LR factor tried"


def test_a_batch_every_seed_of_which_reached_keeps_the_mean_and_the_smallest_and_largest():
    tuned = [run(1.0, 900.0), run(2.0, 800.0)]
    seeds = [tuned[1], run(2.0, 960.0, seed=1), run(2.0, 640.0, seed=2)]
    row = batch_row("s", recipe(), 64, tuned, seeds)
    assert row.steps_mean == pytest.approx(12.5) and row.steps_min_max == [10.0, 15.0]
    assert row.samples_min_max == [640.0, 960.0]
    printed = table([row], None).splitlines()
    assert "steps to goal, mean [min, max] over seeds" in printed[0] and "| 12.5 [10.0, 15.0] |" in printed[2]


def test_a_batch_whose_seeds_noise_scale_is_unresolved_near_the_goal_holds_a_lower_bound_not_a_median():
    def measured(seed: int, value: float | None, lower: float | None = None) -> TimeToTargetRunRow:
        return dataclasses.replace(run(2.0, 640.0, seed=seed), b_simple=value, b_simple_lower=lower,
                                   noise_scale_method="micro-batches")

    tuned = [run(1.0, 900.0), measured(0, 100.0)]
    resolved = batch_row("s", recipe(), 64, tuned, [tuned[1], measured(1, 300.0), measured(2, 200.0)])
    assert (resolved.b_simple, resolved.b_simple_lower) == (200.0, None)
    # One seed says only "above 500": the median of the seeds is at least the median of 100, 200, 500.
    seeds = [tuned[1], measured(1, None, 500.0), measured(2, 200.0)]
    bounded = batch_row("s", recipe(), 64, tuned, seeds)
    assert (bounded.b_simple, bounded.b_simple_lower) == (None, 200.0)
    assert "| > 200 |" in table([bounded], None)
    other = dataclasses.replace(bounded, global_batch=256, steps_per_seed=[5.0] * 3, steps_mean=5.0)
    fit = fit_row("s", recipe(), [bounded, other], {64: seeds, 256: seeds})
    assert fit is not None and (fit.b_simple, fit.b_simple_lower) == (None, 200.0)
    assert "B_simple near the goal > 200 (unresolved: |G|^2 within its noise of 0)" in table([bounded], fit)


def version_1(row: TimeToTargetBatchRow, steps_ci95: list[float] | None) -> dict:
    """The row as the study wrote it before version 2: the seeds' bracket named an interval."""
    record = row_record(row)
    del record["steps_min_max"], record["samples_min_max"]
    samples = None if steps_ci95 is None else [value * row.global_batch for value in steps_ci95]
    return {**record, "schema_version": 1, "steps_ci95": steps_ci95, "samples_ci95": samples}


def test_a_batch_row_of_version_1_reads_with_the_smallest_and_largest_of_its_own_seeds():
    seeds = [run(2.0, 640.0, seed=seed) for seed in range(4)]
    tuned = [run(1.0, 900.0), seeds[0]]  # the recipe's two factors, as a study sweeps them
    four = batch_row("s", recipe(), 64, tuned, [*seeds[:3], run(2.0, 960.0, seed=3)])
    # Four seeds: the old bootstrap ends lay inside the seeds' spread; what is read is the spread.
    old = version_1(four, [10.0, 12.5])
    read, extra = parse_row(TimeToTargetBatchRow, old, Source("rows.jsonl", 1))
    assert read == four and read.steps_min_max == [10.0, 15.0] and extra == {}
    missed = batch_row("s", recipe(), 64, tuned, [seeds[0], run(2.0, None, seed=1)])
    read, _ = parse_row(TimeToTargetBatchRow, version_1(missed, None), Source("rows.jsonl", 2))
    assert read == missed and read.steps_min_max is None and read.samples_min_max is None


def test_the_committed_study_rows_read_with_the_bracket_they_print():
    """The committed studies ran 2 or 3 seeds: their version-1 bootstrap ended exactly at the
    seeds' smallest and largest steps, so the bracket the docs quote is the one read today."""
    files = ["time_to_target_study_mahjong.jsonl", "time_to_target_study_charlm.jsonl",
             "named_time_to_target_gpt2.jsonl"]
    checked = 0
    for name in files:
        for record, source in read_records(REPO_ROOT / "docs" / "results" / name):
            if record["kind"] == TimeToTargetBatchRow.KIND and record["schema_version"] == 1:
                row, _ = parse_row(TimeToTargetBatchRow, record, source)
                assert row.steps_min_max == pytest.approx(record["steps_ci95"], rel=1e-12)
                assert row.samples_min_max == pytest.approx(record["samples_ci95"], rel=1e-12)
                checked += 1
    assert checked == 11
