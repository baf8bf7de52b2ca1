"""`trainspeed plan`: every configuration ranked by predicted time to the goal, the one it
recommends, and the one samples/s alone would pick with how much slower it is predicted to be."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.plan.inputs import PlanInputs
from trainspeed.plan.model import Prediction, StepsModel, overheads, predict, predict_auto, steps_model
from trainspeed.plan.rows import PlanRow

SCHEDULES = ("fixed", "auto")


@dataclass(frozen=True)
class PlanGrid:
    targets: tuple[str, ...]
    devices: tuple[int, ...]
    global_batches: tuple[int, ...]
    schedules: tuple[str, ...] = ("fixed",)
    """"fixed": every global batch held; "auto": per target and device count, a batch from the
    smallest global batch doubling up to the largest."""

    def auto_range(self, devices: int) -> tuple[int, int] | None:
        """The smallest and the largest global batch of the grid that `devices` divide."""
        fitting = [batch for batch in self.global_batches if batch % devices == 0]
        return (min(fitting), max(fitting)) if fitting else None


def default_grid(inputs: PlanInputs, targets: Sequence[str] | None, devices: Sequence[int] | None,
                 batches: Sequence[int] | None, schedules: Sequence[str] | None = None,
                 model: StepsModel | None = None, measuring: bool = False) -> PlanGrid:
    """The bench's targets, one device and every device count a run measured, the study's batches
    (else the bench rows'); a fixed batch, and a growing one where the model has a profile of the
    critical batch to grow by. `measuring` (nothing benched yet): the base run's target, and global
    batches from a quarter to 4 times its own."""
    base = model.base_run if model is not None else None
    found_targets = tuple(sorted({read.row.target for read in inputs.bench}))
    if not found_targets and measuring:
        found_targets = (base.row.target,) if base is not None else (
            (inputs.settings.settings.target,) if inputs.settings is not None else ())
    if not targets and not found_targets:
        raise UsageError("plan: no bench rows among the inputs: give the bench rows of the targets to plan for "
                         "(`trainspeed bench --workload ... --out FILE`), or --targets with rows to come")
    found_devices = tuple(sorted({1, *(run.row.world_size for run in inputs.runs)}))
    if inputs.settings is not None:
        found_batches = tuple(inputs.settings.settings.global_batches)
    else:
        found_batches = tuple(sorted({read.row.batch_size for read in inputs.bench}))
    if not found_batches and measuring and base is not None:
        found_batches = tuple(sorted({max(1, base.row.global_batch * 4 ** power // 4) for power in range(3)}))
    found_schedules = SCHEDULES if model is not None and model.profile is not None else ("fixed",)
    return PlanGrid(tuple(targets or found_targets), tuple(devices or found_devices), tuple(batches or found_batches),
                    tuple(schedules or found_schedules))


def predictions(inputs: PlanInputs, grid: PlanGrid, model: StepsModel) -> list[Prediction]:
    costs = overheads(inputs, model.base_run)
    found = []
    for target in grid.targets:
        for devices in grid.devices:
            if "fixed" in grid.schedules:
                found += [predict(inputs, model, costs, target, devices, batch)
                          for batch in grid.global_batches if batch % devices == 0]
            extent = grid.auto_range(devices)
            if "auto" in grid.schedules and extent is not None:
                found.append(predict_auto(inputs, model, costs, target, devices, *extent))
    return found


def plan_rows(inputs: PlanInputs, grid: PlanGrid, command: str, model: StepsModel | None = None) -> list[PlanRow]:
    """Predicted configurations first, fastest first, then the ones not measured."""
    model = model or steps_model(inputs)
    found = predictions(inputs, grid, model)
    predicted = sorted((p for p in found if p.predicted_s is not None), key=lambda p: p.predicted_s)  # type: ignore[arg-type, return-value]
    missing = [p for p in found if p.predicted_s is None]
    best = predicted[0] if predicted else None
    pick = max(predicted, key=lambda p: p.samples_per_s) if predicted else None  # type: ignore[arg-type, return-value]
    plan_id = f"plan-{int(time.time())}"
    rows = []
    for rank, prediction in enumerate([*predicted, *missing], start=1):
        known = prediction.predicted_s is not None
        rows.append(PlanRow(
            plan_id=plan_id, config=prediction.config, target=prediction.target, devices=prediction.devices,
            global_batch=prediction.global_batch, batch_size_per_device=prediction.global_batch // prediction.devices,
            workload=inputs.identity.name, size=inputs.identity.size, until=inputs.until,
            status="predicted" if known else "not measured", missing=prediction.missing, rank=rank if known else None,
            predicted_s=prediction.predicted_s, predicted_s_ci95=prediction.predicted_s_ci95, steps=prediction.steps,
            steps_ci95=prediction.steps_ci95, steps_trained=prediction.steps_trained, steps_from=model.source,
            step_s=prediction.step_s, step_s_from=prediction.step_s_from, samples_per_s=prediction.samples_per_s,
            statistical_efficiency=prediction.statistical_efficiency, goodput=prediction.goodput,
            overhead_s=prediction.overhead_s, compile_s=prediction.compile_s, validations=prediction.validations,
            validation_s=prediction.validation_s, recommended=prediction is best, samples_per_s_pick=prediction is pick,
            vs_recommended=(prediction.predicted_s / best.predicted_s  # type: ignore[operator]
                            if known and best is not None else None),
            sources=list(prediction.sources), command=command,
            machine=prediction.bench.row.machine if prediction.bench is not None else None,
            schedule=prediction.schedule, batch_max=prediction.batch_max,
            phases=list(prediction.phases) if known else None,
            compilations=list(prediction.compilations) if known else None,
            interval_from=prediction.interval_from or None, extrapolated=prediction.extrapolated is not None,
            extrapolated_why=prediction.extrapolated))
    return rows


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _compiling(row: PlanRow) -> str:
    """The compilations' seconds, and how many nothing measured (left out of the time)."""
    if row.compilations is None:
        return _seconds(row.compile_s)
    if not row.compilations:
        return "–"
    unmeasured = sum(1 for item in row.compilations if item.seconds is None)
    return f"{row.compile_s:,.1f}" + (f" + {unmeasured} not measured" if unmeasured else "")


def unmeasured_compilations(row: PlanRow) -> list[str]:
    return [item.line() for item in row.compilations or [] if item.seconds is None]


def table(rows: Sequence[PlanRow]) -> str:
    """The ranked plan; a time whose compilations were not all measured is a lower bound (>=)."""
    lines = ["| rank | configuration (target/devices/global batch) | predicted s [95%] | steps to goal | steps trained | "
             "step ms | samples/s | start-up s | compilation s | validations | statistical efficiency | goodput | |",
             "|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for row in rows:
        if row.status != "predicted":
            lines.append(f"| – | {row.config} | not measured: {row.missing} | | | | | | | | | | |")
            continue
        interval = (f" [{row.predicted_s_ci95[0]:,.1f}, {row.predicted_s_ci95[1]:,.1f}]" if row.predicted_s_ci95 else "")
        at_least = ">= " if unmeasured_compilations(row) else ""
        mark = ", ".join(name for name, on in (("recommended", row.recommended),
                                              ("samples/s pick", row.samples_per_s_pick),
                                              ("extrapolated", row.extrapolated)) if on)
        batches = (" (" + " → ".join(f"{phase.global_batch}" for phase in row.phases) + ")"
                   if row.schedule == "auto" and row.phases else "")
        lines.append(f"| {row.rank} | {row.config}{batches} | {at_least}{_seconds(row.predicted_s)}{interval} | "
                     f"{row.steps:,.1f} | {_count(row.steps_trained)} | {row.step_s * 1e3:,.1f} | "
                     f"{row.samples_per_s:,.0f} | {_seconds(row.overhead_s)} | {_compiling(row)} | "
                     f"{_count(row.validations)} | {row.statistical_efficiency:.2f} | {row.goodput:,.0f} | {mark} |")
    return "\n".join(lines)


def verdict(rows: Sequence[PlanRow], note: str | None = None) -> str:
    """Where the steps came from (and `note`, what an unresolved noise scale made of them), the
    recommendation with what its interval drew and its compilations, and the samples/s pick."""
    source = f"steps from {rows[0].steps_from}" if rows else "no configuration in the grid"
    if note:
        source += f"\n{note}"
    best = next((row for row in rows if row.recommended), None)
    pick = next((row for row in rows if row.samples_per_s_pick), None)
    if best is None or pick is None:
        return f"{source}\nplan: no configuration could be predicted (every one lacks rows)"
    text = f"recommended: {best.config}, {_predicted(best)} to {best.until}\n{source}\nstep time from {best.step_s_from}"
    if best.interval_from:
        text += f"\ninterval: {best.interval_from}"
    predicted = [row for row in rows if row.status == "predicted"]
    extrapolated = [row for row in predicted if row.extrapolated]
    if extrapolated:
        text += (f"\nextrapolated, {len(extrapolated)} of {len(predicted)} ({', '.join(row.config for row in extrapolated)}): "
                 f"their steps are bounds, not predictions; {extrapolated[0].extrapolated_why}")
    for line in unmeasured_compilations(best):
        text += f"\nleft out of its time: {line}"
    if any(row.schedule == "auto" for row in predicted):
        text += ("\nauto rows predict `train --batch-schedule auto --auto-step-times off`: growth by the noise scale "
                 "alone; by default a run also weighs the step times it measures and grows only where a larger batch "
                 "saves time, which the plan does not model")
    if pick is best:
        return text + "\nsamples/s alone picks the same configuration"
    return (text + f"\nsamples/s alone would pick {pick.config} ({pick.samples_per_s:,.0f} samples/s against "
            f"{best.samples_per_s:,.0f}): {_predicted(pick)}, {pick.vs_recommended:.2f}x the recommended")


def _predicted(row: PlanRow) -> str:
    """A configuration's time as the verdict says it: predicted, or for an extrapolated one the
    interval its bounds span with the model's point that ranked it (not a prediction)."""
    if row.extrapolated and row.predicted_s_ci95 is not None:
        return (f"extrapolated: {row.predicted_s_ci95[0]:,.1f} to {row.predicted_s_ci95[1]:,.1f} s "
                f"(ranked by the model's point {row.predicted_s:,.1f} s, not a prediction)")
    return f"predicted {row.predicted_s:,.1f} s"
