"""Every committed plan check, predicted again by today's plan from the committed inputs, beside
what it measured: is the measured time inside the 95% interval, and within ±25% of the prediction?
An extrapolated configuration (its learning-rate rule never tried near its batch) has bounds on its
steps, not a prediction: it is judged by its interval, and its ratio to the model's point is listed
but not held to ±25%. A check that benched its configuration again just before it ran
(`plan --check-rebench`) is held to today's prediction at the machine's speed then: the same
prediction with its step and compilations at what that bench measured (`trainspeed.plan.speed_now`).

    python benchmarks/plan_coverage.py [--results docs/results] [--csv OUT.csv] [--md OUT.md]

Each plan that made checks (`plan-check` rows in docs/results) is planned again here, without
training anything, from the rows and run folders committed beside it (`CHECKED_PLANS`: the inputs
of each, and the grid of its command). A plan whose own inputs were not all kept says which ones
stand in for them. The checks of a plan none of whose inputs were kept are listed with the interval
their row recorded and left out of today's coverage, with the reason. Reading JSONL and run folders
only, it takes seconds.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.plan.inputs import read_plan_inputs  # noqa: E402
from trainspeed.plan.plan import PlanGrid, plan_rows  # noqa: E402
from trainspeed.plan.plain_count import count_lines, inside, share, within, within_tolerance  # noqa: E402
from trainspeed.plan.rows import PlanCheckRow, PlanRow  # noqa: E402
from trainspeed.plan.speed_now import interval_at, predicted_at  # noqa: E402
from trainspeed.plan.steps import steps_model  # noqa: E402
from trainspeed.rows import parse_row  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
TOLERANCE = 0.25
EAGER, COMPILED = "cpu:eager:fp32", "cpu:compile:fp32"


@dataclass(frozen=True)
class CheckedPlan:
    """One plan that ran checks: the file of its rows, its plan id, what it read (paths under the
    results folder), its grid, and what differs from the inputs it had ("" where nothing does)."""

    name: str
    rows: str
    plan_id: str
    inputs: tuple[str, ...]
    targets: tuple[str, ...]
    devices: tuple[int, ...]
    batches: tuple[int, ...] | None
    schedules: tuple[str, ...]
    note: str = ""
    machine: str = "CPU"
    """Where its checks ran: "CPU" (the 2-core shared machine the rows name) or "TPU" (one v5e chip,
    its host running one job at a time)."""


def _runs(folder: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{folder}/{name}" for name in names)


SUMMARY_ONLY = ("its short compiled run was kept as its summary.json alone (no metrics.jsonl): the plan reads "
                "neither the run's micro-batches (its efficiency is taken against the whole batch's bench row) nor "
                "its validation graph's compilation (not measured)")


def _base_run(name: str, target: str, devices: tuple[int, ...], batches: tuple[int, ...], schedules: tuple[str, ...],
              plan_id: str, runs: tuple[str, ...] = ()) -> CheckedPlan:
    folder = f"plan_checks_{name}"
    return CheckedPlan(f"{folder} ({'compiled' if target == COMPILED else 'eager'})", f"{folder}.jsonl", plan_id,
                       (folder, f"{folder}/bench.jsonl", *runs), (target,), devices, batches, schedules,
                       SUMMARY_ONLY if runs else "")


PLAIN_SETS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("charlm", "plan-1796616397", (4, 8, 16, 32, 64, 128, 256)),
    ("gpt2", "plan-1796616612", (2, 4, 8, 16, 32, 64, 128)))
"""The checks `benchmarks/plan_checks_plain.sh` names before they run: (workload, plan id, grid)."""
TPU_SETS: tuple[tuple[str, str, str, tuple[int, ...]], ...] = (
    ("tpu_plan_set_tiny", "plan-1796636719", "Mahjong tiny on the TPU", (32, 64, 128, 256, 512, 1024, 2048)),
    ("tpu_plan_set_tiny_second", "plan-1796646238", "Mahjong tiny on the TPU, a second set (the plan's compiles "
     "at batches the base run did not train at shifted by the bench's)", (32, 64, 128, 256, 512, 1024, 2048)),)
"""The checks `benchmarks/tpu_train.sh plan-set` names before they run, all on the chip: (folder, plan id,
what it trained, grid)."""
UNKEPT = "the inputs of this pass (its base run, bench rows and short runs) were replaced by the later pass's"
CHECKED_PLANS = (
    _base_run("mahjong", EAGER, (1,), (32, 128, 2048), ("fixed", "auto"), "plan-1796383452"),
    _base_run("mahjong", COMPILED, (1,), (32,), ("fixed",), "plan-1796383619",
              ("plan_checks_mahjong/runs/ranks1-cpu-compile-fp32-b32",)),
    _base_run("charlm", EAGER, (1,), (8, 32, 512), ("fixed", "auto"), "plan-1796383728"),
    _base_run("charlm", COMPILED, (1,), (32,), ("fixed",), "plan-1796383851",
              ("plan_checks_charlm/runs/ranks1-cpu-compile-fp32-b32",)),
    _base_run("gpt2", EAGER, (1,), (8, 32, 128), ("fixed", "auto"), "plan-1796383949"),
    _base_run("gpt2", COMPILED, (1,), (8,), ("fixed",), "plan-1796384135",
              ("plan_checks_gpt2/runs/ranks1-cpu-compile-fp32-b8",)),
    CheckedPlan("plan_check_seeds_charlm", "plan_check_seeds_charlm.jsonl", "plan-1796572044",
                ("plan_check_seeds_charlm", "plan_check_seeds_charlm/bench.jsonl"), (EAGER,), (1,), (8, 32, 512),
                ("fixed", "auto")),
    CheckedPlan("critical_batch_charlm_plan", "critical_batch_charlm_plan.jsonl", "plan-1796384833",
                ("critical_batch_charlm_base", "critical_batch_charlm.jsonl", "plan_checks_charlm/bench.jsonl"),
                (EAGER,), (1,), (8, 32, 512), ("fixed", "auto"),
                "its own bench rows were not kept: those of plan_checks_charlm (the same machine, 18 minutes earlier) "
                "stand in"),
    CheckedPlan("critical_batch_gpt2_plan", "critical_batch_gpt2_plan.jsonl", "plan-1796385233",
                ("critical_batch_gpt2_base", "critical_batch_gpt2.jsonl", "plan_checks_gpt2/bench.jsonl"),
                (EAGER,), (1,), (8, 32, 128), ("fixed", "auto"),
                "its own bench rows were not kept: those of plan_checks_gpt2 (the same machine, 21 minutes earlier) "
                "stand in"),
    CheckedPlan("plan_mahjong", "plan_mahjong.jsonl", "plan-1796282077",
                ("plan_bench_mahjong.jsonl", *_runs("plan_mahjong/runs", (
                    "ranks1-b128", "ranks1-b2048", "ranks1-b32", "ranks1-b512", "ranks2-b1024", "ranks2-b16",
                    "ranks2-b256", "ranks2-b64")), "time_to_target_study_mahjong.jsonl"),
                (EAGER, COMPILED), (1, 2), None, ("fixed",)),
    CheckedPlan("plan_charlm", "plan_charlm.jsonl", "plan-1796282183",
                ("plan_bench_charlm.jsonl", *_runs("plan_charlm/runs", (
                    "ranks1-b128", "ranks1-b32", "ranks1-b512", "ranks1-b8", "ranks2-b16", "ranks2-b256", "ranks2-b4",
                    "ranks2-b64")), "time_to_target_study_charlm.jsonl"),
                (EAGER, COMPILED), (1, 2), None, ("fixed",)),
    CheckedPlan("named_plan_gpt2", "named_plan_gpt2.jsonl", "plan-1796586200",
                ("named_plan_bench_gpt2.jsonl", *_runs("named_plan_gpt2/runs", ("ranks1-b128", "ranks1-b32", "ranks1-b8")),
                 "named_time_to_target_gpt2.jsonl"),
                (EAGER, COMPILED), (1,), None, ("fixed",)),
    CheckedPlan("plan_check_study_seeds_gpt2", "plan_check_study_seeds_gpt2.jsonl", "plan-1796579398",
                ("plan_check_study_seeds_gpt2/time_to_target.jsonl", "plan_check_study_seeds_gpt2/bench.jsonl",
                 *_runs("plan_check_study_seeds_gpt2/measured/runs", (
                     "ranks1-cpu-compile-fp32-b128", "ranks1-cpu-compile-fp32-b32", "ranks1-cpu-compile-fp32-b8",
                     "ranks1-cpu-eager-fp32-b8"))),
                (EAGER, COMPILED), (1,), (8, 32, 128), ("fixed",)),
    CheckedPlan("tpu_plan_check", "tpu_plan_check.jsonl", "plan-1796480007",
                ("tpu_plan_check_bench.jsonl", "tpu_plan_check_b64"), ("jax:jit:fp32",), (1,), (64, 128, 256),
                ("fixed",), machine="TPU"),
    *(CheckedPlan(f"plan_checks_plain_{name}", f"plan_checks_plain_{name}.jsonl", plan_id,
                  (f"plan_checks_plain_{name}", f"plan_checks_plain_{name}/bench.jsonl"), (EAGER,), (1,), batches,
                  ("fixed",))
      for name, plan_id, batches in PLAIN_SETS),
    *(CheckedPlan(name, f"{name}.jsonl", plan_id, (f"{name}/bench.jsonl", f"{name}/base"), ("jax:jit:fp32",), (1,),
                  batches, ("fixed",), machine="TPU")
      for name, plan_id, _, batches in TPU_SETS),
    *(CheckedPlan(f"plan_checks_warm_cache ({name})", "plan_checks_warm_cache.jsonl", plan_id, (), (COMPILED,), (1,),
                  None, ("fixed",), f"not predicted again: {UNKEPT}; its check ran with torch.compile's on-disk cache "
                                    "filled, which the plan does not model")
      for name, plan_id in (("mahjong", "plan-1796358907"), ("charlm", "plan-1796359201"), ("gpt2", "plan-1796359553"))),
)


@dataclass(frozen=True)
class Coverage:
    """One check: what its row recorded, what today's plan predicts for it, and what it measured."""

    plan: str
    config: str
    seed: int
    measured_s: float
    recorded_s: float
    recorded_ci95: list[float] | None
    predicted_s: float | None
    predicted_ci95: list[float] | None
    extrapolated: bool
    note: str
    now_s: float | None = None
    """Today's prediction at the machine's speed when the check ran, where it re-benched (`--check-rebench`)."""
    now_ci95: list[float] | None = None

    @property
    def predicted_again(self) -> bool:
        return self.predicted_s is not None

    @property
    def judged_s(self) -> float | None:
        """What the check is held to: today's prediction, at the speed now where it re-benched."""
        return self.now_s if self.now_s is not None else self.predicted_s

    @property
    def inside(self) -> bool | None:
        interval = (self.now_ci95 if self.now_s is not None else self.predicted_ci95) if self.predicted_again else None
        return None if interval is None else interval[0] <= self.measured_s <= interval[1]

    @property
    def recorded_inside(self) -> bool | None:
        interval = self.recorded_ci95
        return None if interval is None else interval[0] <= self.measured_s <= interval[1]

    @property
    def ratio(self) -> float | None:
        return self.measured_s / self.predicted_s if self.predicted_s else None

    @property
    def judged_ratio(self) -> float | None:
        return self.measured_s / self.judged_s if self.judged_s else None

    @property
    def within(self) -> bool | None:
        """Within ±25% of today's prediction (at the speed now where the check re-benched); None
        where there is none (not predicted again, or extrapolated: bounds, not a prediction)."""
        ratio = self.judged_ratio
        return None if ratio is None or self.extrapolated else within_tolerance(ratio, TOLERANCE)

    @property
    def recorded_ratio(self) -> float:
        return self.measured_s / self.recorded_s


@dataclass(frozen=True)
class ConfigurationMean:
    """A configuration's prediction beside the mean of its check runs (one run, or one per seed of
    `plan --check-seeds`): the prediction is of a run's expected time, which one run scatters about."""

    plan: str
    config: str
    runs: int
    measured_s: float
    predicted_s: float
    extrapolated: bool

    @property
    def ratio(self) -> float:
        return self.measured_s / self.predicted_s

    @property
    def within(self) -> bool | None:
        return None if self.extrapolated else within_tolerance(self.ratio, TOLERANCE)


def configuration_means(found: list[Coverage]) -> list[ConfigurationMean]:
    """Each predicted-again configuration of a plan, in table order, with the mean of its runs."""
    grouped: dict[tuple[str, str], list[Coverage]] = {}
    for item in found:
        if item.predicted_again:
            grouped.setdefault((item.plan, item.config), []).append(item)
    return [ConfigurationMean(plan, config, len(items), statistics.fmean(item.measured_s for item in items),
                              items[0].judged_s, items[0].extrapolated)  # type: ignore[arg-type]
            for (plan, config), items in grouped.items()]


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _planned(plan: CheckedPlan, results: Path) -> dict[str, PlanRow]:
    inputs = read_plan_inputs([results / path for path in plan.inputs])
    model = steps_model(inputs)
    batches = plan.batches or tuple(inputs.settings.settings.global_batches)  # type: ignore[union-attr]
    rows = plan_rows(inputs, PlanGrid(plan.targets, plan.devices, batches, plan.schedules), "plan_coverage", model)
    return {row.config: row for row in rows if row.status == "predicted"}


def coverage(results: Path = RESULTS) -> list[Coverage]:
    found = []
    for plan in CHECKED_PLANS:
        checks = [record for record in _records(results / plan.rows)
                  if record.get("kind") == "plan-check" and record.get("plan_id") == plan.plan_id]
        today = _planned(plan, results) if plan.inputs else {}
        for check in checks:
            row = today.get(check["config"])
            rebenched = row is not None and bool(check.get("rebench_samples_per_s"))
            step_ratio = check["bench_samples_per_s"] / check["rebench_samples_per_s"] if rebenched else 1.0
            found.append(Coverage(
                plan.name, check["config"], check["seed"], check["measured_s"], check["predicted_s"],
                check.get("predicted_s_ci95"),
                row.predicted_s if row is not None else None, row.predicted_s_ci95 if row is not None else None,
                bool(row is not None and row.extrapolated), plan.note,
                predicted_at(row, step_ratio, check.get("rebench_compile_s")) if rebenched else None,  # type: ignore[arg-type]
                interval_at(row, step_ratio, check.get("rebench_compile_s")) if rebenched else None))  # type: ignore[arg-type]
    return found


FIELDS = ("plan", "config", "seed", "measured_s", "recorded_s", "recorded_lo", "recorded_hi", "recorded_inside",
          "recorded_ratio", "predicted_s", "predicted_lo", "predicted_hi", "now_s", "now_lo", "now_hi", "inside",
          "ratio", "ratio_now", "within_25",
          "extrapolated", "note")


def _csv_row(item: Coverage) -> dict:
    recorded = item.recorded_ci95 or [None, None]
    predicted = item.predicted_ci95 or [None, None]
    now = item.now_ci95 or [None, None]
    ratio = item.ratio
    return {"plan": item.plan, "config": item.config, "seed": item.seed, "measured_s": round(item.measured_s, 3),
            "recorded_s": round(item.recorded_s, 3), "recorded_lo": _rounded(recorded[0]),
            "recorded_hi": _rounded(recorded[1]), "recorded_inside": item.recorded_inside,
            "recorded_ratio": round(item.recorded_ratio, 4), "predicted_s": _rounded(item.predicted_s),
            "predicted_lo": _rounded(predicted[0]), "predicted_hi": _rounded(predicted[1]),
            "now_s": _rounded(item.now_s), "now_lo": _rounded(now[0]), "now_hi": _rounded(now[1]), "inside": item.inside,
            "ratio": None if ratio is None else round(ratio, 4),
            "ratio_now": None if item.now_s is None else round(item.judged_ratio, 4),  # type: ignore[arg-type]
            "within_25": item.within, "extrapolated": item.extrapolated,
            "note": item.note}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _interval(interval: list[float] | None) -> str:
    return "–" if not interval else f"[{interval[0]:,.1f}, {interval[1]:,.1f}]"


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**no**")


def _within(within: bool | None, extrapolated: bool) -> str:
    return "– (bounds)" if extrapolated else _yes(within)


def _ratios(means: list[ConfigurationMean]) -> str:
    return "–" if not means else f"{min(mean.ratio for mean in means):.2f}-{max(mean.ratio for mean in means):.2f}"


def _median_width(group: list[Coverage]) -> float:
    return statistics.median(item.predicted_ci95[1] / item.predicted_ci95[0] for item in group)  # type: ignore[index]


@dataclass(frozen=True)
class Printed:
    """A check row of a committed plan, read as its plan printed it."""

    plan: CheckedPlan
    check: PlanCheckRow


def printed(results: Path = RESULTS) -> list[Printed]:
    """Every committed check beside the prediction its plan printed, in the order of `CHECKED_PLANS`."""
    found = []
    for plan in CHECKED_PLANS:
        path = results / plan.rows
        for number, record in enumerate(_records(path), 1):
            if record.get("kind") == "plan-check" and record.get("plan_id") == plan.plan_id:
                found.append(Printed(plan, parse_row(PlanCheckRow, record, f"{path}:{number}")[0]))
    return found


MACHINES = {"CPU": "on the 2-core CPU (shared; each row records its load)",
            "TPU": "on the TPU v5e (one chip; its host runs one job at a time)"}


def _counts(title: str, items: list[Printed], one_plan: bool = False) -> list[str]:
    names = {item.check.plan_id: item.plan.name for item in items}
    lines = count_lines([item.check for item in items], one_plan,
                        lambda check: f"{names[check.plan_id]} `{check.config}`")
    return [f"**{title}**", "", *(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in lines), ""]


def _printed_table(items: list[Printed]) -> list[str]:
    lines = ["| machine | plan | configuration | seed | printed: predicted s [95%] | extrapolated when printed | "
             "measured s | measured / printed | within ±25% | inside |", "|---|---|---|---:|---|---|---:|---:|---|---|"]
    for item in items:
        check = item.check
        lines.append(f"| {item.plan.machine} | {item.plan.name} | `{check.config}`{' (best)' if check.recommended else ''} "
                     f"| {check.seed} | {check.predicted_s:,.1f} {_interval(check.predicted_s_ci95)} | "
                     f"{'yes' if check.extrapolated else ''} | {check.measured_s:,.1f} | "
                     f"{check.measured_s / check.predicted_s:.2f} | {_yes(within(check))} | {_yes(inside(check))} |")
    return [*lines, ""]


def plain_markdown(items: list[Printed]) -> str:
    """The plain count first: every check, then each machine's, then each set named before it ran."""
    lines = ["## Counted plainly", "",
             "Each check's measured seconds (its whole `trainspeed train` command, or for `plan --checked` the "
             "run's start-up and seconds to the goal) over the prediction its plan printed, and whether they lie "
             "inside the 95% interval it printed. Then each rule, with the count under it and the checks it moves.",
             "", *_counts("Every check", items)]
    for machine, where in MACHINES.items():
        lines += _counts(f"The checks {where}", [item for item in items if item.plan.machine == machine])
    named_sets = [*((f"plan_checks_plain_{name}", name) for name, _, _ in PLAIN_SETS),
                  *((name, trained) for name, _, trained, _ in TPU_SETS)]
    for plan_name, label in named_sets:
        named = [item for item in items if item.plan.name == plan_name]
        lines += _counts(f"{label}: the best, the batch below and the batch above, named before any ran, "
                         f"{len({item.check.seed for item in named})} seeds each", named, one_plan=True)
    return "\n".join([*lines, *_printed_table(items)]) + "\n"


def markdown(found: list[Coverage]) -> str:
    again = [item for item in found if item.predicted_again]
    lines = ["## Predicted again by today's plan", "",
             "A rule of its own: each check held to what today's model predicts from the committed inputs, "
             "not to what its plan printed.", "",
        "| plan | configuration | seed | measured s | recorded: predicted s [95%], inside, ratio | "
        "today: predicted s [95%] | at the speed now: predicted s [95%] | inside | measured / predicted | "
        "within ±25% | extrapolated |",
        "|---|---|---:|---:|---|---|---|---|---:|---|---|"]
    for item in found:
        ratio = item.ratio
        now = "–" if item.now_s is None else f"{_seconds(item.now_s)} {_interval(item.now_ci95)}"
        ratios = "–" if ratio is None else f"{ratio:.2f}" + (f" (now {item.judged_ratio:.2f})" if item.now_s else "")
        lines.append(
            f"| {item.plan} | `{item.config}` | {item.seed} | {item.measured_s:,.1f} | {_seconds(item.recorded_s)} "
            f"{_interval(item.recorded_ci95)}, {_yes(item.recorded_inside)}, {item.recorded_ratio:.2f} | "
            f"{_seconds(item.predicted_s)} {_interval(item.predicted_ci95)} | {now} | {_yes(item.inside)} | "
            f"{ratios} | {_within(item.within, item.extrapolated)} | {'yes' if item.extrapolated else ''} |")
    notes = sorted({(item.plan, item.note) for item in found if item.note})
    lines += ["", *(f"- {plan}: {note}" for plan, note in notes), ""]
    means = configuration_means(found)
    several = [mean for mean in means if mean.runs > 1]
    if several:
        lines += ["| plan | configuration | runs (seeds) | mean measured s | today: predicted s (at the speed now where "
                  "re-benched) | mean / predicted | "
                  "within ±25% |", "|---|---|---:|---:|---:|---:|---|"]
        lines += [f"| {mean.plan} | `{mean.config}` | {mean.runs} | {mean.measured_s:,.1f} | {mean.predicted_s:,.1f} | "
                  f"{mean.ratio:.2f} | {_within(mean.within, mean.extrapolated)} |" for mean in several]
        lines.append("")
    recorded = [item for item in found if item.recorded_ci95 is not None]
    predicted = [mean for mean in means if not mean.extrapolated]
    bounded = [mean for mean in means if mean.extrapolated]
    lines += [
        share("- today's 95% intervals, checks predicted again: measured inside",
              sum(1 for item in again if item.inside), len(again)),
        *(share(f"  - {what}: measured inside", sum(1 for item in group if item.inside), len(group))
          + f"; median width, high / low: {_median_width(group):.2f}"
          for what, group in (("not extrapolated", [item for item in again if not item.extrapolated]),
                              ("extrapolated", [item for item in again if item.extrapolated])) if group),
        share("- the same, counting the checks not predicted again as outside",
              sum(1 for item in again if item.inside), len(found)),
        share("- the intervals the check rows recorded: measured inside",
              sum(1 for item in recorded if item.recorded_inside), len(recorded)),
        share("- today's predictions (configurations not extrapolated) within ±25% of the measured, per "
              "configuration (the mean of its runs where it ran at several seeds)",
              sum(1 for mean in predicted if mean.within), len(predicted)),
        share("- the same, per run", sum(1 for item in again if item.within),
              sum(1 for item in again if not item.extrapolated)),
        f"- extrapolated configurations (bounds, not predictions; judged by their intervals above): {len(bounded)}, "
        f"measured / the model's point {_ratios(bounded)}",
        share("- the recorded predictions within ±25%, per run, extrapolated ones included",
              sum(1 for item in found if within_tolerance(item.recorded_ratio, TOLERANCE)), len(found))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder of the committed rows")
    parser.add_argument("--csv", type=Path, help="write the table as CSV here")
    parser.add_argument("--md", type=Path, help="write the table as Markdown here (else to stdout)")
    args = parser.parse_args(argv)
    found = coverage(args.results)
    page = plain_markdown(printed(args.results)) + "\n" + markdown(found)
    if args.csv is not None:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(_csv_row(item) for item in found)
        atomic_write_text(args.csv, text.getvalue())
    if args.md is not None:
        atomic_write_text(args.md, page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
