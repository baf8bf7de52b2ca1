"""Checks counted plainly: each check against the prediction its plan printed, before any rule, and
each rule with the count under it and the checks it moves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from trainspeed.plan.plain_count import RULES, best_line, count_lines, inside, plain_summary, within
from trainspeed.plan.rows import PlanCheckRow
from trainspeed.rows import parse_row

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _committed_checks(name: str) -> list[PlanCheckRow]:
    records = [json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()]
    return [parse_row(PlanCheckRow, record, name)[0] for record in records if record["kind"] == "plan-check"]


def _check(config: str, seed: int, measured_s: float, predicted_s: float = 10.0, interval=(8.0, 12.5),
           **changes) -> PlanCheckRow:
    (template,) = _committed_checks("plan_checks_charlm.jsonl")[:1]
    fields = {"recommended": False, "extrapolated": False, "predicted_s_now": None, **changes}
    return dataclasses.replace(template, plan_id="plan-x", config=config, seed=seed, measured_s=measured_s,
                               predicted_s=predicted_s, predicted_s_ci95=list(interval) if interval else None, **fields)


def test_the_plain_count_is_each_row_s_seconds_over_the_prediction_it_printed():
    """Every committed check of the seeds' plan: the count is measured over the row's own
    `predicted_s`, and inside is the row's own interval, whatever a rule says of the row."""
    rows = [json.loads(line) for line in (RESULTS / "plan_check_seeds_charlm.jsonl").read_text().splitlines()]
    records = [row for row in rows if row["kind"] == "plan-check"]
    checks = _committed_checks("plan_check_seeds_charlm.jsonl")
    hits = sum(abs(row["measured_s"] / row["predicted_s"] - 1) <= 0.25 for row in records)
    held = sum(row["predicted_s_ci95"][0] <= row["measured_s"] <= row["predicted_s_ci95"][1] for row in records)
    assert all(check.extrapolated for check in checks), "the plan printed these as extrapolated"
    assert hits < held, "the rule moves these checks: the plain count must not follow it"
    assert count_lines(checks)[0].startswith(f"plainly, within ±25% of the printed prediction: {hits} of {len(records)}")
    assert count_lines(checks)[1].startswith(f"plainly, inside the printed 95% interval: {held} of {len(records)}")
    assert plain_summary(checks) == (f"checks counted plainly: {hits} of {len(records)} within ±25% of the printed "
                                     f"prediction, {held} of {len(records)} inside the printed 95% interval")


def test_extrapolated_is_only_what_the_plan_printed():
    """A row without the flag (a plan that printed none) is held to ±25% under the rule too, however a
    later model would call its batch."""
    (older,) = [check for check in _committed_checks("plan_checks_charlm.jsonl") if check.config == "cpu:eager:fp32/1/8"]
    extrapolated = next(rule for rule in RULES if rule.name == "extrapolated")
    assert not older.extrapolated and not within(older) and inside(older) is False
    assert extrapolated.judge(older) is False


def test_each_rule_names_the_checks_it_moves_both_ways():
    hit_by_interval = _check("a", 1, 14.0, interval=(8.0, 15.0), extrapolated=True)  # 1.40: a plain miss, inside
    miss_by_interval = _check("b", 1, 12.4, interval=(8.0, 12.0), extrapolated=True)  # 1.24: a plain hit, outside
    plain_hit = _check("c", 1, 11.0)
    at_speed_now = _check("d", 1, 14.0, predicted_s_now=13.0)  # 1.40 plainly, 1.08 at the speed now
    lines = count_lines([hit_by_interval, miss_by_interval, plain_hit, at_speed_now])
    assert lines[0].startswith("plainly, within ±25% of the printed prediction: 2 of 4")
    assert lines[1].startswith("plainly, inside the printed 95% interval: 2 of 4")
    rule = lines.index(next(line for line in lines if line.startswith('rule "extrapolated"')))
    assert ": hits: 2 of 4" in lines[rule] and lines[rule].endswith("it moves 1 misses to hits, 1 hits to misses")
    assert lines[rule + 1:rule + 3] == ["  to a hit: plan-x `a` seed 1 (1.40)", "  to a miss: plan-x `b` seed 1 (1.24)"]
    now = lines.index(next(line for line in lines if line.startswith('rule "speed now"')))
    assert ": hits: 3 of 4" in lines[now] and lines[now + 1] == "  to a hit: plan-x `d` seed 1 (1.40)"


def test_seeds_are_one_verdict_under_their_rule_and_the_best_is_set_beside_the_fastest():
    runs = [_check("best", seed, seconds, recommended=True) for seed, seconds in ((1, 13.0), (2, 7.5))]
    other = [_check("other", seed, seconds, predicted_s=9.0) for seed, seconds in ((1, 9.4), (2, 9.8))]
    lines = count_lines([*runs, *other], one_plan=True)
    assert any(line.startswith('rule "mean of seeds"') and "configurations within ±25%: 2 of 2" in line
               and line.endswith("plainly, 1 of 2 have every run within") for line in lines)
    assert best_line([*runs, *other]) == ("the plan's best (`best`, 10.2 s, the mean of 2) is 7% slower than the "
                                          "fastest (`other`, 9.6 s): holds (fastest or within 10%)")
    slower = [dataclasses.replace(run, measured_s=run.measured_s * 1.2) for run in runs]
    assert best_line([*slower, *other]).endswith("misses (fastest or within 10%)")
    assert best_line(runs) is None


def test_the_report_gives_the_plain_count_first_and_each_check_s_plain_verdict_beside_the_rule_s():
    from trainspeed.plan.report import PART, plan_section
    from trainspeed.plan.rows import PlanRow
    from trainspeed.report.reading import read_inputs

    inputs = read_inputs([RESULTS / "plan_checks_plain_gpt2.jsonl"], (PART,))
    checks = inputs.of(PlanCheckRow)
    section = plan_section(inputs.of(PlanRow), checks)
    hits = sum(within(read.row) for read in checks)
    assert 0 < hits < len(checks), "the committed set has hits and misses"
    assert (f"Counted plainly, then under each rule: plainly, within ±25% of the printed prediction: {hits} of "
            f"{len(checks)}") in section.intro
    table = section.tables[0]
    plainly = [name for name, _ in table.columns].index("plainly: within ±25%, 95% interval")
    assert [row[plainly].text for row in table.rows] == [
        f"{'yes' if within(read.row) else 'no'}, {'inside' if inside(read.row) else 'outside'}" for read in checks]
