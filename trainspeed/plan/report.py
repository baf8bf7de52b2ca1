"""The plan's part of the report: each plan's ranked table, and its checks as measured against
predicted time to the goal on a scatter with the y = x line (and the tolerance band)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from trainspeed.errors import UsageError
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from trainspeed.report.figures import COLOURS, caption_machines, figure_block, plt, readable_number, save_figure
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, interval, number, readable, text
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.plan.plain_count import count_lines, inside, within
from trainspeed.plan.rows import PlanCheckRow, PlanRow


def check_figure(checks: Sequence[PlanCheckRow]) -> Figure:
    """Measured against predicted seconds to the goal, one colour per workload, y = x and its band;
    an extrapolated configuration hollow, at the model's point that ranked it; a cross at the
    prediction at the machine's speed when the check ran, where it re-benched."""
    figure, axes = plt.subplots(figsize=(7.5, 5.6), constrained_layout=True)
    any_extrapolated = any(row.extrapolated for row in checks)
    workloads = sorted({(row.workload, row.size, row.until) for row in checks})
    for number_, key in enumerate(workloads):
        rows = [row for row in checks if (row.workload, row.size, row.until) == key]
        colour = COLOURS[number_ % len(COLOURS)]
        for row in rows:
            low, high = row.predicted_s_ci95 or (row.predicted_s, row.predicted_s)
            marker = "*" if row.recommended else ("D" if row.samples_per_s_pick else "o")
            axes.errorbar(row.predicted_s, row.measured_s, xerr=[[row.predicted_s - low], [high - row.predicted_s]],
                          fmt=marker, color=colour, markersize=9 if row.recommended else 6, capsize=2,
                          markerfacecolor="none" if row.extrapolated else colour)
            axes.annotate(row.config, (row.predicted_s, row.measured_s), fontsize=6, xytext=(4, -8),
                          textcoords="offset points")
            if row.predicted_s_now is not None:  # where the prediction moves at the machine's speed now
                axes.plot(row.predicted_s_now, row.measured_s, "X", color="black", markersize=6, zorder=3)
        axes.plot([], [], "o", color=colour, label=f"{key[0]} {key[1]} to {key[2]}")
    values = [value for row in checks for value in (row.predicted_s, row.measured_s, row.predicted_s_now)
              if value is not None]
    line = np.geomspace(min(values) / 1.3, max(values) * 1.3, 20)
    tolerance = checks[0].tolerance
    axes.plot(line, line, "-", color="grey", label="y = x")
    axes.fill_between(line, line * (1 - tolerance), line * (1 + tolerance), color="grey", alpha=0.12,
                      label=f"±{tolerance:.0%}")
    axes.plot([], [], "*", color="black", label="recommended")
    axes.plot([], [], "D", color="black", label="samples/s pick")
    if any_extrapolated:
        axes.plot([], [], "o", color="black", markerfacecolor="none",
                  label="extrapolated: its steps bounded,\nnot predicted (judged by its interval)")
    if any(row.predicted_s_now is not None for row in checks):
        axes.plot([], [], "X", color="black", markersize=6,
                  label="the prediction at the machine's speed\nwhen it ran (--check-rebench)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(readable_number))
        axis.set_minor_formatter(NullFormatter())
    said = "; extrapolated: the model's point" if any_extrapolated else ""
    axes.set_xlabel(f"predicted seconds to the goal (log scale{said})")
    axes.set_ylabel("measured seconds to the goal (log scale)")
    axes.set_title("The plan's predictions, checked")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return figure


def _latest(reads: Sequence[Read[PlanRow]]) -> list[Read[PlanRow]]:
    """The newest plan of each workload, size and goal (plan ids carry their time)."""
    newest: dict[tuple, str] = {}
    for read in reads:
        key = (read.row.workload, read.row.size, read.row.until)
        newest[key] = max(newest.get(key, read.row.plan_id), read.row.plan_id)
    return [read for read in reads if newest[(read.row.workload, read.row.size, read.row.until)] == read.row.plan_id]


def tolerance_verdict(check: PlanCheckRow) -> str:
    """A check's verdict under the plan's rule: the tolerance, or for an extrapolated configuration
    (its steps bounded, not predicted) its interval. The table gives the plain verdict before it."""
    if check.extrapolated and check.inside is not None:
        return "extrapolated: by its interval, " + ("inside" if check.inside else "outside")
    return f"{'yes' if check.within else 'no'} (±{check.tolerance:.0%})"


def _plainly(check: PlanCheckRow) -> str:
    return f"{'yes' if within(check) else 'no'}, {'inside' if inside(check) else 'outside'}"


def plan_section(plans: Sequence[Read[PlanRow]], checks: Sequence[Read[PlanCheckRow]]) -> Section:
    section = Section(
        "time-to-target-plan", "Time to target: the plan and its check",
        "`trainspeed plan` predicts each configuration's time to the goal: steps to the goal at the global batch "
        "(the study's fit) x step time (bench samples/s at the per-device batch, over the efficiency a run of as many "
        "devices measured), plus start-up, compilation and validation. Goodput is samples/s x statistical efficiency "
        "(1 / (1 + B / B_crit), as in Pollux). Checks ran configurations to the goal on another seed than the study's; "
        "a check made with `--check-rebench` also stands against the prediction at the machine's speed when it ran "
        "(its bench row measured again just before it).")
    if checks:
        counted = count_lines([read.row for read in checks], name_of=None)
        section.intro += " Counted plainly, then under each rule: " + "; ".join(counted) + "."
        section.figures.append(figure_block(
            "fig-plan-check", "Measured against predicted seconds to the goal (whole `trainspeed train` command), "
            "with the predictions' 95% intervals (rows of plans before they drew one run's steps hold the model's mean "
            "steps only); the band is the tolerance",
            check_figure([read.row for read in checks]), list(checks)))
        section.tables.append(Table(
            "table-plan-check", "Every check: the configuration run to the goal, measured against predicted",
            [("plan", False), ("workload", False), ("goal", False), ("configuration", False), ("role", False),
             ("predicted s", True), ("95% interval", False), ("measured s", True), ("measured / predicted", True),
             ("plainly: within ±25%, 95% interval", False), ("under the plan's rule", False),
             ("steps predicted", True), ("steps measured", True), ("step ms predicted", True),
             ("step ms measured, steady", True), ("step ms measured, with compilations", True),
             ("predicted s at the speed now", True), ("measured / predicted now", True)],
            [[text(c.plan_id), text(f"{c.workload} {c.size}"), text(c.until), text(c.config),
              text(", ".join(name for name, on in (("recommended", c.recommended), ("samples/s pick", c.samples_per_s_pick))
                             if on)),
              number(c.predicted_s, "{:,.1f}"), text(interval(c.predicted_s_ci95, "{:,.1f}")),
              number(c.measured_s, "{:,.1f}"), number(c.ratio, "{:.2f}"),
              text(_plainly(c)), text(tolerance_verdict(c)), number(c.predicted_steps, "{:,.1f}"),
              number(c.measured_steps, "{:,.1f}"), number(c.predicted_step_s * 1e3, "{:,.1f}"),
              number(c.steady_step_s * 1e3 if c.steady_step_s is not None else None, "{:,.1f}"),
              number(c.measured_step_s * 1e3 if c.measured_step_s is not None else None, "{:,.1f}"),
              number(c.predicted_s_now, "{:,.1f}"), number(c.ratio_now, "{:.2f}")]
             for c in (read.row for read in checks)], provenance(checks)))
    latest = _latest(plans)
    if latest:
        section.tables.append(Table(
            "table-plan", "The newest plan of each workload and goal, ranked by predicted time to the goal",
            [("plan", False), ("workload", False), ("goal", False), ("rank", True), ("configuration", False),
             ("predicted s", True), ("95% interval", False), ("steps to goal", True), ("steps trained", True),
             ("step ms", True), ("samples/s", True), ("statistical efficiency", True), ("goodput", True),
             ("vs recommended", True), ("role", False), ("step time from", False)],
            [[text(p.plan_id), text(f"{p.workload} {p.size}"), text(p.until), number(p.rank, "{:d}"), text(p.config),
              number(p.predicted_s, "{:,.1f}") if p.status == "predicted" else text(f"not measured: {p.missing}"),
              text(interval(p.predicted_s_ci95, "{:,.1f}")), number(p.steps, "{:,.1f}"),
              number(p.steps_trained, "{:,.0f}"),
              number(p.step_s * 1e3 if p.step_s is not None else None, "{:,.2f}"), readable(p.samples_per_s),
              number(p.statistical_efficiency, "{:.2f}"), readable(p.goodput), number(p.vs_recommended, "{:.2f}x"),
              text(", ".join(name for name, on in (("recommended", p.recommended), ("samples/s pick", p.samples_per_s_pick))
                             if on)), text(p.step_s_from)]
             for p in (read.row for read in latest)], provenance(latest)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    plans, checks = inputs.of(PlanRow), inputs.of(PlanCheckRow)
    return [plan_section(plans, checks)] if plans or checks else []


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    """`trainspeed plot` of a plan's rows: its checks, measured against predicted."""
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds plan rows: --baseline and --run-id are for bench rows")
    checks = [read.row for read in inputs.of(PlanCheckRow)]
    if not checks:
        raise UsageError(f"{request.results}: no plan checks to plot (`trainspeed plan ... --check best`)")
    figure = check_figure(checks)
    caption_machines(figure, checks)
    return save_figure(figure, request.stem)


PART = ReportPart(name="plan", kinds=(RowKind(PlanRow), RowKind(PlanCheckRow)), sections=sections,
                  counts=lambda inputs: [("plan rows", len(inputs.of(PlanRow))),
                                         ("plan checks", len(inputs.of(PlanCheckRow)))], plot=plot)
