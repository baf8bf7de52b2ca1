"""Plan checks counted plainly: each check's measured seconds over the prediction its plan printed
(the check row's own `predicted_s` and `predicted_s_ci95`), before any rule.

A rule changes what a check is held to. Each is stated after the plain count, with the count under
it and the checks it moves, so a reader sees what the rule buys:
- "extrapolated": a check whose plan printed its configuration as extrapolated (the row's own flag,
  never one a later model gives it) is judged by its printed interval, not by the tolerance;
- "speed now": a check that benched its configuration again just before it ran
  (`plan --check-rebench`) is held to the prediction at the machine's speed then, which its row
  recorded (`predicted_s_now`);
- "mean of seeds": a configuration checked at several seeds is one verdict, the mean of its runs
  against the prediction (a count of configurations, not of runs).

The plan's report and the committed coverage page both count with these functions."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from trainspeed.plan.rows import PlanCheckRow
from trainspeed.stats import wilson_interval

TOLERANCE = 0.25
"""What "within" means here, whatever tolerance a row was checked at: one count across plans."""
FASTEST_WITHIN = 0.10
"""A plan's best holds where its mean time is the fastest measured of its checks, or within this share."""


def within_tolerance(ratio: float, tolerance: float) -> bool:
    """Measured over predicted lies within 1 +- tolerance (ends included)."""
    return abs(ratio - 1) <= tolerance


def within(check: PlanCheckRow) -> bool:
    """The measured seconds within ±25% of the printed prediction."""
    return within_tolerance(check.measured_s / check.predicted_s, TOLERANCE)


def inside(check: PlanCheckRow) -> bool:
    """The measured seconds inside the printed 95% interval (False where none was printed)."""
    interval = check.predicted_s_ci95
    return interval is not None and interval[0] <= check.measured_s <= interval[1]


@dataclass(frozen=True)
class Rule:
    name: str
    says: str
    judge: Callable[[PlanCheckRow], bool]
    """True: the check is a hit under the rule."""


def _extrapolated_by_interval(check: PlanCheckRow) -> bool:
    return inside(check) if check.extrapolated else within(check)


def _at_speed_now(check: PlanCheckRow) -> bool:
    if check.predicted_s_now is None:
        return within(check)
    return within_tolerance(check.measured_s / check.predicted_s_now, TOLERANCE)


RULES = (
    Rule("extrapolated", "a check whose plan printed it as extrapolated is judged by its printed 95% interval, "
                         "not by ±25%", _extrapolated_by_interval),
    Rule("speed now", "a check that benched again just before it ran is held to its row's prediction at the "
                      "machine's speed then", _at_speed_now),
)


def share(what: str, hits: int, total: int) -> str:
    if not total:
        return f"{what}: none"
    low, high = wilson_interval(hits, total)
    return f"{what}: {hits} of {total} ({hits / total:.0%}; Wilson 95% [{low:.0%}, {high:.0%}])"


def _plan_and_config(check: PlanCheckRow) -> str:
    return f"{check.plan_id} `{check.config}`"


def rule_line(rule: Rule, checks: Sequence[PlanCheckRow],
              name_of: Callable[[PlanCheckRow], str] | None = _plan_and_config) -> list[str]:
    """The count under the rule, then each check it turns from a miss to a hit or from a hit to a
    miss, named by `name_of` (None: the count alone)."""
    to_hit = [check for check in checks if rule.judge(check) and not within(check)]
    to_miss = [check for check in checks if within(check) and not rule.judge(check)]
    moved = ", ".join(f"{len(group)} {what}" for group, what in ((to_hit, "misses to hits"), (to_miss, "hits to misses"))
                      if group) or "nothing"
    head = share(f"rule \"{rule.name}\" ({rule.says}): hits", sum(map(rule.judge, checks)), len(checks))
    if name_of is None:
        return [f"{head}; it moves {moved}"]
    return [f"{head}; it moves {moved}",
            *(f"  {'to a hit' if check in to_hit else 'to a miss'}: {name_of(check)} seed {check.seed} "
              f"({check.measured_s / check.predicted_s:.2f})" for check in (*to_hit, *to_miss))]


@dataclass(frozen=True)
class ConfigurationRuns:
    """A configuration's check runs (one per seed) against the one prediction its plan printed."""

    check: PlanCheckRow
    measured: tuple[float, ...]

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.measured)

    @property
    def within(self) -> bool:
        return within_tolerance(self.mean_s / self.check.predicted_s, TOLERANCE)


def configurations(checks: Sequence[PlanCheckRow]) -> list[ConfigurationRuns]:
    """Each (plan, configuration) in the order its first check comes, with the seconds of its runs."""
    grouped: dict[tuple[str, str], list[PlanCheckRow]] = {}
    for check in checks:
        grouped.setdefault((check.plan_id, check.config), []).append(check)
    return [ConfigurationRuns(runs[0], tuple(run.measured_s for run in runs)) for runs in grouped.values()]


def mean_of_seeds_line(checks: Sequence[PlanCheckRow]) -> str:
    several = [runs for runs in configurations(checks) if len(runs.measured) > 1]
    every_run = sum(all(within_tolerance(seconds / runs.check.predicted_s, TOLERANCE) for seconds in runs.measured)
                    for runs in several)
    return (share("rule \"mean of seeds\" (a configuration checked at several seeds is judged by the mean of its "
                  "runs): configurations within ±25%", sum(runs.within for runs in several), len(several))
            + f"; plainly, {every_run} of {len(several)} have every run within")


def best_line(checks: Sequence[PlanCheckRow]) -> str | None:
    """For the checks of one plan that ran its best beside others: is the best's mean time the
    fastest measured, or within 10% of it? None where the plan's best was not checked beside another."""
    runs = configurations(checks)
    best = next((item for item in runs if item.check.recommended), None)
    if best is None or len(runs) < 2:
        return None
    fastest = min(runs, key=lambda item: item.mean_s)
    verdict = "the fastest measured" if fastest is best else (
        f"{best.mean_s / fastest.mean_s - 1:.0%} slower than the fastest (`{fastest.check.config}`, "
        f"{fastest.mean_s:,.1f} s)")
    holds = best.mean_s <= fastest.mean_s * (1 + FASTEST_WITHIN)
    return (f"the plan's best (`{best.check.config}`, {best.mean_s:,.1f} s, the mean of {len(best.measured)}) is "
            f"{verdict}: {'holds' if holds else 'misses'} (fastest or within {FASTEST_WITHIN:.0%})")


def plain_summary(checks: Sequence[PlanCheckRow]) -> str:
    """What `plan --check` prints last: the checks counted plainly, before any rule."""
    return (f"checks counted plainly: {sum(map(within, checks))} of {len(checks)} within ±25% of the printed "
            f"prediction, {sum(map(inside, checks))} of {len(checks)} inside the printed 95% interval")


def count_lines(checks: Sequence[PlanCheckRow], one_plan: bool = False,
                name_of: Callable[[PlanCheckRow], str] | None = _plan_and_config) -> list[str]:
    """The plain count first, then each rule with what it moves (each check it moves named by
    `name_of`, indented; None: the counts alone); for one plan's checks, its best."""
    lines = [share("plainly, within ±25% of the printed prediction", sum(map(within, checks)), len(checks)),
             share("plainly, inside the printed 95% interval", sum(map(inside, checks)), len(checks))
             + (f" ({sum(check.predicted_s_ci95 is None for check in checks)} printed none)"
                if any(check.predicted_s_ci95 is None for check in checks) else ""),
             f"printed as extrapolated: {sum(check.extrapolated for check in checks)} of {len(checks)}"]
    for rule in RULES:
        lines += rule_line(rule, checks, name_of)
    lines.append(mean_of_seeds_line(checks))
    best = best_line(checks) if one_plan else None
    return [*lines, *([best] if best else [])]
