"""The committed coverage table of the plan's intervals is what the script makes of the committed
rows today: a change to the plan's model that moves a prediction or an interval fails here until
the table (`docs/results/plan_coverage.{csv,md}`) is made again."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import plan_coverage

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_committed_coverage_table_is_the_one_the_committed_rows_give(tmp_path):
    csv, md = tmp_path / "coverage.csv", tmp_path / "coverage.md"
    assert plan_coverage.main(["--csv", str(csv), "--md", str(md)]) == 0
    assert csv.read_text() == (RESULTS / "plan_coverage.csv").read_text()
    assert md.read_text() == (RESULTS / "plan_coverage.md").read_text()


def test_every_committed_check_is_in_the_table_once():
    """Every plan-check row committed in docs/results, in both tables once: 89 checks in 16 files;
    those whose plan's inputs were not kept are counted plainly and listed, not predicted again."""
    import json

    committed = [(path.name, record["plan_id"], record["config"], record["seed"])
                 for path in sorted(RESULTS.glob("*.jsonl")) for record in map(json.loads, path.read_text().splitlines())
                 if record.get("kind") == "plan-check"]
    found = plan_coverage.coverage()
    printed = plan_coverage.printed()
    assert len(found) == len({(item.plan, item.config, item.seed) for item in found}) == len(committed) == 89
    assert sorted((item.plan.rows, item.check.plan_id, item.check.config, item.check.seed) for item in printed) == \
        sorted(committed)
    assert sum(1 for item in found if not item.predicted_again) == 3
    assert all(item.note for item in found if not item.predicted_again)


def test_a_configuration_checked_at_several_seeds_is_one_pair_of_its_mean_and_its_prediction():
    """The prediction is of a run's expected time: the ±25% pair of a configuration run at 5 seeds
    is their mean against it; one run's configuration is its own pair."""
    found = plan_coverage.coverage()
    means = {(mean.plan, mean.config): mean for mean in plan_coverage.configuration_means(found)}
    assert len(means) == len({(item.plan, item.config) for item in found if item.predicted_again}) == 40
    runs = [item for item in found if (item.plan, item.config) == ("plan_check_seeds_charlm", "cpu:eager:fp32/1/8")]
    mean = means["plan_check_seeds_charlm", "cpu:eager:fp32/1/8"]
    assert [item.seed for item in runs] == [1000, 1001, 1002, 1003, 1004] and mean.runs == 5
    assert mean.measured_s == sum(item.measured_s for item in runs) / 5 and mean.predicted_s == runs[0].predicted_s


def test_an_extrapolated_configuration_is_judged_by_its_interval_and_holds_no_within():
    """Its steps are bounds, not a prediction: no ±25% verdict for it or its runs (the summary
    counts the others), while its ratio to the model's point and its interval stay in the table."""
    found = plan_coverage.coverage()
    bounded = [item for item in found if item.extrapolated]
    assert bounded and all(item.within is None and item.ratio is not None and item.inside is not None
                           for item in bounded)
    assert all(item.within is not None for item in found if item.predicted_again and not item.extrapolated)
    means = plan_coverage.configuration_means(found)
    assert all((mean.within is None) == mean.extrapolated for mean in means)
    table = plan_coverage.markdown(found)
    assert "| – (bounds) |" in table and f"extrapolated configurations (bounds, not predictions; judged by their " \
        f"intervals above): {sum(mean.extrapolated for mean in means)}," in table


def test_a_check_that_benched_again_is_held_to_the_prediction_at_the_speed_it_measured():
    """The named hf:gpt2 plan was checked with `--check-rebench`: each of its checks is judged against
    today's prediction moved to the speed its bench row measured again (its ratio and interval),
    the same move `plan` made when it ran, while the plain ratio stays in the table beside it."""
    import json

    from trainspeed.plan.speed_now import interval_at, predicted_at

    found = [item for item in plan_coverage.coverage() if item.plan == "named_plan_gpt2"]
    records = {(row["config"], row["seed"]): row for row in map(json.loads, (RESULTS / "named_plan_gpt2.jsonl")
               .read_text().splitlines()) if row["kind"] == "plan-check"}
    planned = plan_coverage._planned(next(plan for plan in plan_coverage.CHECKED_PLANS
                                          if plan.name == "named_plan_gpt2"), RESULTS)
    assert len(found) == 6
    for item in found:
        record = records[item.config, item.seed]
        ratio = record["bench_samples_per_s"] / record["rebench_samples_per_s"]
        row = planned[item.config]
        assert item.now_s == pytest.approx(predicted_at(row, ratio, record["rebench_compile_s"]))
        assert item.now_ci95 == pytest.approx(interval_at(row, ratio, record["rebench_compile_s"]))
        assert item.now_s == pytest.approx(record["predicted_s_now"])  # today's plan predicts as the check's did
        assert item.judged_s == item.now_s and item.within == (abs(item.measured_s / item.now_s - 1) <= 0.25)
        assert item.inside == (item.now_ci95[0] <= item.measured_s <= item.now_ci95[1])
        assert item.ratio == pytest.approx(item.measured_s / item.predicted_s)  # the plain ratio, kept
