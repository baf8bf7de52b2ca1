"""`trainspeed train --exported DIR --data SHARDS`: train with exported steps where only JAX is.

The loop of one device, in the trainer's own terms: the batches the shard loader would read (same
seed, same order), the run's LR rule (`trainspeed.train.lr_rule`: the peak scaled with the batch,
warm-up, cosine) fed to the program as its learning-rate input, validation through the exported
eval program with the metrics the manifest says how to make from its sums, a quality goal
(`--until`), checkpoints and `--resume`. It writes the rows and run folder every target writes
(`metrics.jsonl`, `summary.json`, `train_config.json`), so `report`, `plot` and `plan` read them.

What the programs were exported with cannot change here: the workload, its step, its precision and
the batch sizes. The noise-scale meter runs where the folder holds a step in slices (`export
--noise-scale-micro-batches K`): with `--noise-scale-micro-batches K`, one step in
`--noise-scale-every` runs that program over a random partition of its batch (NumPy's, drawn from
the seed and the measurements so far), and the same moving averages as the torch trainer's
(`trainspeed.gradients.noise_averages`) give the same rows and summary fields, which `plan` reads.
A folder exported for N devices (`export --devices N`) trains over a mesh of N devices, each
step's batch (N x `--batch-size-per-device`) split over them; it must find N devices here.
Gradient accumulation, a growing batch, more ranks or another target are refused in one line.
Dispatch is asynchronous: the host reads the next batch while the device steps, and the loss is
read (a sync) once per logged window.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed import jaxrt
from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory
from trainspeed.errors import UsageError
from trainspeed.exported.checkpoint import Position, save_checkpoint
from trainspeed.exported.data import ShardSet
from trainspeed.exported.load import ExportedSteps
from trainspeed.exported.manifest import MANIFEST, MAX_MANIFEST_BYTES, Manifest, SlicedProgram, sha256_of
from trainspeed.exported.resume import Continuation, ResumePoint, continue_run, plan_resume
from trainspeed.exported.run_folder import check_run_folder
from trainspeed.gradients.noise_averages import NoiseAverages, partition_seed
from trainspeed.gradients.rows import summary_fields
from trainspeed.machine import Machine
from trainspeed.rows import row_record
from trainspeed.train.config import TrainConfig, resolve_lr
from trainspeed.train.data_read import check_same_data, loader_record, record_data
from trainspeed.train.lr_rule import LearningRates, lr_multiplier
from trainspeed.train.rows import (
    CONFIG_FILE,
    METRICS_FILE,
    EvalRecord,
    RunSummary,
    WindowRecord,
)
from trainspeed.train.run_lock import hold_run_lock
from trainspeed.train.startup import seconds_since_start
from trainspeed.train.time_to_target import RunTotals, TargetTracker, check_goal_metric, parse_goal
from trainspeed.user_files import read_regular

DEFAULTS = TrainConfig()
NOT_RUN_HERE = "auto batch schedules are not run on exported steps"


def refuse_unsupported(config: TrainConfig) -> None:
    """One line for each setting an exported step cannot honour (its own flag named): none is
    taken and silently ignored."""
    batch = config.batch
    asks = [
        ("--nproc/--nnodes", config.world_size != 1, "the devices are the export's (export --devices N); several "
         "processes need the jax target where torch is"),
        ("--target", config.target != DEFAULTS.target, "the target is the one exported (its precision is in the step)"),
        ("--synthetic-data", config.synthetic_data, "give --data; `bench --exported` times the synthetic batch"),
        ("--batch-schedule", batch.schedule is not None, "the batch is one exported batch size"),
        ("--max-batch-per-device", batch.max_batch_per_device is not None,
         "the batch is one exported batch size; `export --micro-batch-size N` steps it in micro-batches"),
        ("--global-batch-min/--global-batch-max", (batch.global_batch_min, batch.global_batch_max) != (None, None),
         NOT_RUN_HERE),
        ("--critical-batch", batch.critical_batch is not None, NOT_RUN_HERE),
        ("--auto-step-times", batch.auto_step_times != DEFAULTS.batch.auto_step_times, NOT_RUN_HERE),
        ("--init-from", config.init_from is not None, "start from the exported state, or --resume a run of it"),
        ("--bench-jsonl", config.bench_jsonl is not None, "not read by a run of exported steps"),
        ("--bad-samples", config.bad_samples != DEFAULTS.bad_samples,
         "a shard set is read whole or refused; a damaged shard stops the run in one line"),
        ("--threads", config.threads != DEFAULTS.threads, "torch's threads, and no torch runs here"),
        ("--num-workers", config.num_workers != DEFAULTS.num_workers,
         "the batches are read in this process while the device steps"),
    ]
    for flag, given, why in asks:
        if given:
            raise UsageError(f"train --exported: {flag} is not for exported steps ({why})")


def refuse_drawn_state(manifest: Manifest, folder: Path) -> None:
    """An export whose large parameters are drawn on the device (`export --initial-state drawn`)
    is for benches: its model is not the workload's own initialisation, so a run of it would be
    compared with runs it does not match."""
    drawn = manifest.initial_state == "drawn" or any(leaf.source in ("constant", "normal") for leaf in manifest.state)
    if drawn:
        raise UsageError(f"train --exported: {folder} was exported with --initial-state drawn (its large parameters "
                         "drawn on the device, for benches); export it again with --initial-state file to train it")


@dataclass(frozen=True)
class RunPlan:
    """What the run does, resolved once before anything is written."""

    batch_size: int
    total_steps: int
    peak_lrs: list[float]
    """Per optimizer param group, in the manifest's order."""
    rates: LearningRates
    goal: Any
    eval_every_steps: int
    eval_every_samples: int
    sliced: SlicedProgram | None = None
    """The step in slices the noise-scale meter runs (None: the meter is off)."""


def _sliced(config: TrainConfig, manifest: Manifest, batch: int, folder: Path) -> SlicedProgram | None:
    """The step in slices the run measures the noise scale with, where it asks for one; one line
    where the export has no such step or another number of slices."""
    sliced = manifest.program(batch).sliced
    parts = config.noise_scale_micro_batches
    if config.noise_scale == "off" or parts == 1:
        if config.noise_scale == "on":
            told = (f"; this export has a step in {sliced.parts} slices: give --noise-scale-micro-batches {sliced.parts}"
                    if sliced is not None else "; export with --noise-scale-micro-batches K to measure it")
            print(f"train: the gradient noise scale is not measured: an exported step's gradients stay inside it{told}",
                  flush=True)
        return None
    if sliced is None or sliced.parts != parts:
        has = f"a step in {sliced.parts} slices" if sliced is not None else "no step in slices"
        raise UsageError(f"train --exported: --noise-scale-micro-batches {parts}: {folder} has {has} at batch size "
                         f"{batch}; give the export's number, or export again with --noise-scale-micro-batches {parts}")
    return sliced


def _plan(config: TrainConfig, manifest: Manifest, data: ShardSet, folder: Path) -> RunPlan:
    batch = config.batch_size_per_device * manifest.program_devices  # the program's batch: every device's
    manifest.program(batch)
    if data.train.num_samples < batch:
        raise UsageError(f"--data {data.folder}: its train split holds {data.train.num_samples} samples, fewer than "
                         f"one batch of {batch}; give more data or a smaller exported batch size")
    total = config.total_steps(data.batches_per_epoch(batch))
    lr = resolve_lr(config.lr, manifest.lr_reference_batch)
    first = {}
    for group in manifest.optimizer_groups:
        first.setdefault(group.optimizer, group.lr)
    rates = LearningRates.derive(first, lr, batch, total)
    peaks = [(lr.base_lr if lr.base_lr is not None else group.lr) * rates.scale for group in manifest.optimizer_groups]
    goal = parse_goal(config.until) if config.until is not None else None
    metrics = [formula.metric for formula in manifest.eval_summary]
    if goal is not None:
        check_goal_metric(goal, metrics, manifest.workload)
    validates = goal is not None or config.eval_every or config.eval_every_samples
    if validates and data.val.num_samples < batch:
        raise UsageError(f"--data {data.folder}: its val split holds {data.val.num_samples} samples, fewer than one "
                         f"batch of {batch}, so no validation could run; give more data")
    return RunPlan(batch, total, peaks, rates, goal, config.eval_every, config.eval_every_samples,
                   _sliced(config, manifest, batch, folder))


@dataclass
class Window:
    """The logged window open now: its steps, host seconds, and each step's loss as the device
    returned it (read, a sync, once: when the window closes, or before a pause)."""

    started: float
    first_step: int
    steps: int = 0
    wait_s: float = 0.0
    h2d_s: float = 0.0
    losses: list[Any] = field(default_factory=list)
    epoch: int = 0

    def add(self, loss: Any, wait_s: float, h2d_s: float, epoch: int) -> None:
        self.losses.append(loss)
        self.steps += 1
        self.wait_s += wait_s
        self.h2d_s += h2d_s
        self.epoch = epoch

    def loss_values(self) -> list[float]:
        import numpy as np

        return [float(value) for value in np.asarray([np.asarray(loss) for loss in self.losses], dtype=np.float64)]

    def first_non_finite_step(self, values: list[float] | None = None) -> int | None:
        """The step (counted as steps done) whose loss was first NaN or infinite, or None."""
        for index, value in enumerate(self.loss_values() if values is None else values):
            if not math.isfinite(value):
                return self.first_step + index + 1
        return None


@dataclass
class LoopClock:
    """This invocation's host time, with validation and checkpoint pauses kept apart, and the
    steady state's start (after `--timing-warmup-steps`: the first compile and load)."""

    started: float
    cpu_started: float
    paused: float = 0.0
    steady_started: float | None = None
    steady_samples: int = 0
    paused_before_steady: float = 0.0

    def steady_from(self, now: float, samples: int) -> None:
        self.steady_started, self.steady_samples, self.paused_before_steady = now, samples, self.paused

    def steady_rate(self, ended: float, samples: int) -> float | None:
        if self.steady_started is None or samples <= self.steady_samples:
            return None
        seconds = ended - self.steady_started - (self.paused - self.paused_before_steady)
        return (samples - self.steady_samples) / max(seconds, 1e-9)


class ExportedRun:
    """One invocation: the state on the device, the clock, the rows."""

    def __init__(self, config: TrainConfig, steps: ExportedSteps, data: ShardSet, plan: RunPlan, command: str,
                 manifest_sha256: str) -> None:
        self.config, self.steps, self.data, self.plan, self.command = config, steps, data, plan, command
        self.manifest = steps.manifest
        self.run_dir = Path(config.out_dir)
        self.manifest_sha256 = manifest_sha256
        self.program = steps.train_program(plan.batch_size)
        self.eval_program = steps.eval_program(plan.batch_size)
        self.tracker = TargetTracker(plan.goal, config.until) if plan.goal is not None else None
        self.totals = RunTotals()
        self.step = 0
        self.samples = 0
        self.first_step = 0
        self.machine = Machine.at_start()
        self.validation: dict[str, float] | None = None
        self.last_loss: float | None = None
        self.compilations_logged = 0
        self.diverged_at: int | None = None
        """Programs compiled up to the last window's row (each row counts its window's)."""
        self.wait_s = 0.0
        """Host seconds reading batches, and handing them to the device, over this invocation."""
        self.h2d_s = 0.0
        self.startup_s: float | None = None
        """This invocation's command start to its first step (`trainspeed.train.startup`)."""
        sliced = plan.sliced
        self.meter = None if sliced is None else NoiseAverages(
            sliced.networks, world_size=1, samples_per_rank=plan.batch_size, micro_batches=sliced.parts,
            smoothing=config.noise_scale_smoothing, seed=config.seed, every=config.noise_scale_every)
        """The noise-scale meter over the exported step in slices (None: not measured)."""

    # --- state ---------------------------------------------------------------------------------
    def start(self, point: ResumePoint | None) -> None:
        """The state on the device: the export's initial state, or the checkpoint `point` with the
        loop's position, clock, goal and noise-scale averages it carries (loaded before anything
        is written: one that does not load is one line)."""
        if point is None:
            self.state = self.steps.initial_state()
            return
        position = point.position
        try:
            if self.tracker is not None:
                self.tracker.load_state(position.goal)
            if self.meter is not None:
                self.meter.load_state(position.noise_scale)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise UsageError(f"train: cannot resume: {point.path} holds a goal's watch or noise-scale averages that do "
                             f"not load ({type(error).__name__}: {str(error)[:160]}); remove it (and its .sha256) to "
                             "resume from an older one") from None
        self.state = self.steps.placement.put_state(list(point.leaves))
        self.step = self.first_step = position.step
        self.samples = position.samples
        self.totals = dataclasses.replace(position.clock)
        self.totals.resumes += 1

    def checkpoint(self) -> None:
        position = Position(self.step, self.samples, self.manifest_sha256, self.plan.batch_size, self.config.seed,
                            dataclasses.replace(self.totals), self.tracker.state() if self.tracker is not None else None,
                            self.meter.state() if self.meter is not None else None)
        save_checkpoint(self.run_dir, self.state, position, self.config.keep_checkpoints)

    # --- rows ----------------------------------------------------------------------------------
    def write_row(self, row: Any) -> None:
        record = row.as_row() if hasattr(row, "as_row") else row_record(row)
        append_line(self.run_dir / METRICS_FILE, json.dumps(record, sort_keys=True))

    def learning_rates(self, step: int) -> Any:
        import numpy as np

        factor = lr_multiplier(step, self.plan.total_steps, self.plan.rates.warmup_steps, self.plan.rates.min_lr_ratio)
        return np.asarray([peak * factor for peak in self.plan.peak_lrs], dtype=np.float32)

    def validate(self) -> EvalRecord:
        import numpy as np

        sums: dict[str, Any] = {}
        for batch in self.data.val_batches(self.plan.batch_size, self.config.eval_batches):
            outputs = self.eval_program(self.state, self.steps.on_devices(batch)) if self.eval_program is not None else []
            for name, value in zip(self.manifest.eval_metrics, outputs):
                array = np.asarray(value, dtype=np.float64)
                sums[name] = sums[name] + array if name in sums else array
        metrics = {formula.metric: formula.value(sums) for formula in self.manifest.eval_summary} if sums else {}
        record = EvalRecord(step=self.step, metrics=metrics)
        self.validation = metrics
        return record

    def due_for_validation(self, previous_samples: int) -> bool:
        if self.plan.eval_every_samples:
            return self.samples // self.plan.eval_every_samples > previous_samples // self.plan.eval_every_samples
        return bool(self.plan.eval_every_steps) and self.step % self.plan.eval_every_steps == 0

    # --- the loop --------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        import jax

        self.startup_s = seconds_since_start()
        clock = LoopClock(started=time.perf_counter(), cpu_started=time.process_time())
        window = Window(clock.started, self.step)
        orders: dict[int, Any] = {}
        stop = False
        while self.step < self.plan.total_steps and not stop and self.diverged_at is None:
            previous_samples = self.step_once(window, orders)
            if self.step - self.first_step == self.config.timing_warmup_steps:
                jax.block_until_ready(self.state)
                clock.steady_from(time.perf_counter(), self.samples)
            if self.step % self.config.log_every == 0 or self.step == self.plan.total_steps:
                window = self.close_window(window, clock)
            validate = self.due_for_validation(previous_samples) or (
                self.step == self.plan.total_steps and self.plan.goal is not None)
            checkpoint = bool(self.config.checkpoint_every) and self.step % self.config.checkpoint_every == 0
            if (validate or checkpoint) and self.diverged_at is None:
                stop = self.pause(clock, window, validate, checkpoint)
        if window.steps:  # stopped at the goal (or diverged) inside a window
            self.close_window(window, clock)
        jax.block_until_ready(self.state)
        ended = time.perf_counter()
        wall = ended - clock.started
        self.totals.wall_s += wall
        if self.diverged_at is None:  # a diverged run's weights are no state to continue from
            self.checkpoint()
        else:
            print(f"train: the training loss was not finite at step {self.diverged_at}; the run diverged there "
                  "(a smaller --lr may train)", flush=True)
        return self._summary(wall, clock.paused, clock.steady_rate(ended, self.samples),
                             (time.process_time() - clock.cpu_started) / max(wall, 1e-9))

    def step_once(self, window: "Window", orders: dict[int, Any]) -> int:
        """One step: read the batch (the host's part), hand it over, dispatch the program (the
        device runs it while the host reads the next); the samples trained before it."""
        batch = self.plan.batch_size
        epoch, number = divmod(self.step, self.data.batches_per_epoch(batch))
        if epoch not in orders:
            orders.clear()
            orders[epoch] = self.data.epoch_order(epoch, batch)
        read_at = time.perf_counter()
        host_batch = self.data.train_batch(epoch, number, batch, orders[epoch])
        placed_at = time.perf_counter()
        device_batch = self.steps.on_devices(host_batch)
        stepped_at = time.perf_counter()
        if self.meter is not None and self.meter.measures(self.step):
            loss = self.measured_step(device_batch)
        else:
            self.program = self.steps.train_program(self.plan.batch_size, self.step)
            self.state, loss = self.program(self.state, device_batch, self.learning_rates(self.step))
        window.add(loss, placed_at - read_at, stepped_at - placed_at, epoch)
        self.step += 1
        self.samples += batch
        return self.samples - batch

    def measured_step(self, device_batch: list[Any]) -> Any:
        """One step through the step in slices, its norms added to the meter (they stay on the
        device until the window is read); the loss."""
        import numpy as np

        assert self.meter is not None
        order = np.random.default_rng(partition_seed(self.config.seed, self.meter.measurements())).permutation(
            self.plan.batch_size).astype(np.int32)
        program, sliced = self.steps.sliced_program(self.plan.batch_size)
        self.state, loss, small_sq, big_sq = program(self.state, device_batch, self.learning_rates(self.step), order)
        self.meter.step = self.step
        for name, small, big in zip(sliced.networks, small_sq, big_sq):
            self.meter.slices_measured(name, small, big)
        return loss

    def pause(self, clock: "LoopClock", window: "Window", validate: bool, checkpoint: bool) -> bool:
        """Validate and/or checkpoint, the time kept out of the training seconds; True: the goal
        was met and the run stops there."""
        import jax

        jax.block_until_ready(self.state)
        paused_at = time.perf_counter()
        self.diverged_at = window.first_non_finite_step()
        if self.diverged_at is not None:
            return True  # neither a validation nor a checkpoint of diverged weights
        stop = False
        if validate:
            trained_s = self.totals.train_s + paused_at - window.started
            record = self.validate()
            self.write_row(record)
            print("val " + ", ".join(f"{name} {value:.4g}" for name, value in record.metrics.items())
                  + f" at step {self.step}", flush=True)
            if self.tracker is not None:
                reached = self.tracker.observe(record, self.samples, trained_s,  # wall: the validation in it
                                               self.totals.wall_s + time.perf_counter() - clock.started)
                stop = reached and self.config.stop_at_target
        if checkpoint:
            self.checkpoint()
        pause = time.perf_counter() - paused_at
        clock.paused += pause
        window.started += pause
        return stop

    def close_window(self, window: "Window", clock: "LoopClock") -> "Window":
        """Read the window's mean loss (the sync), count its seconds as trained, write its row;
        the next window."""
        values = window.loss_values()
        self.last_loss = sum(values) / len(values)
        self.diverged_at = self.diverged_at or window.first_non_finite_step(values)
        now = time.perf_counter()
        self.wait_s += window.wait_s
        self.h2d_s += window.h2d_s
        self.totals.train_s += now - window.started
        self.write_row(self._window(window, now - window.started, now - clock.started - clock.paused,
                                    self.totals.wall_s + now - clock.started))
        for record in self.meter.read_window(self.step, self.samples) if self.meter is not None else []:
            self.write_row(record)
        return Window(now, self.step)

    def _window(self, window: "Window", seconds: float, elapsed: float, run_wall: float) -> WindowRecord:
        """The window's row: `elapsed` this invocation's training seconds so far, `run_wall` the run's
        wall seconds over its invocations, pauses included (what `run_train_s` leaves out of it is
        what the run paused: its validations and checkpoints, which `plan` reads)."""
        seconds = max(seconds, 1e-9)
        steps = window.steps
        return WindowRecord(
            step=self.step, epoch=window.epoch, loss=self.last_loss, lr=float(self.learning_rates(self.step)[0]),
            samples_per_s=steps * self.plan.batch_size / seconds, step_time_s=seconds / steps,
            data_wait_s_per_step=window.wait_s / steps, data_wait_fraction=window.wait_s / seconds,
            data_wait_fraction_worst_rank=window.wait_s / seconds, h2d_s_per_step=window.h2d_s / steps,
            elapsed_s=elapsed, run_train_s=self.totals.train_s, run_wall_s=run_wall, samples=self.samples,
            global_batch=self.plan.batch_size, compilations=self._new_compilations())

    def _new_compilations(self) -> int:
        compiled = sum(programs.count for programs in self.steps.train_programs(self.plan.batch_size))
        count = compiled - self.compilations_logged
        self.compilations_logged = compiled
        return count

    def _summary(self, wall: float, paused: float, steady: float | None, cpu_per_wall: float) -> RunSummary:
        steps_run = max(1, self.step - self.first_step)
        trained = (self.step - self.first_step) * self.plan.batch_size
        end_to_end = trained / max(wall - paused, 1e-9)
        wait_fraction = self.wait_s / max(wall - paused, 1e-9)
        target = self.manifest.target
        devices = self.manifest.program_devices
        time_to_target = None
        if self.tracker is not None:
            time_to_target = self.tracker.record(self.totals, step=self.step, samples=self.samples,
                                                 global_batch=self.plan.batch_size, world_size=devices, target=target)
            self.write_row(time_to_target)
        rates = dataclasses.asdict(self.plan.rates)
        return RunSummary(
            workload=self.manifest.workload, size=self.manifest.size, target=target, world_size=devices,
            batch_size_per_device=self.plan.batch_size // devices, global_batch=self.plan.batch_size,
            synthetic_data=False,
            num_workers=0, threads=None, first_step=self.first_step, last_step=self.step, samples=self.samples,
            wall_s=max(wall, 1e-9), paused_s=paused, end_to_end_samples_per_s=end_to_end, steady_samples_per_s=steady,
            samples_per_s_per_device=(steady if steady is not None else end_to_end) / devices,
            step_time_s=max(wall - paused, 1e-9) / steps_run, data_wait_fraction=wait_fraction,
            data_wait_fraction_worst_rank=wait_fraction, steady_data_wait_fraction=None,
            h2d_s_per_step=self.h2d_s / steps_run, final_loss=self.last_loss,
            validation=self.validation, bench_samples_per_s=None, io_efficiency=None, stopped_by_signal=False,
            torch_version=self.manifest.versions.get("torch", "none"), learning_rates=rates,
            workload_module=self.manifest.workload_module, workload_version=self.manifest.workload_version,
            workload_sha256=self.manifest.workload_sha256, cpu_s_per_wall_s=cpu_per_wall,
            machine=self.machine.at_end(), time_to_target=time_to_target, diverged_at_step=self.diverged_at,
            startup_s=self.startup_s,
            **summary_fields(self.meter.last_quarter(0, self.step) if self.meter is not None else None),
            data={"path": str(self.data.folder), "exported": str(self.steps.folder),
                  "exported_manifest_sha256": self.manifest_sha256, "device": jaxrt.device().device_kind},
        )


def recorded_settings(config: TrainConfig, manifest: Manifest, plan: RunPlan, folder: Path) -> TrainConfig:
    """The run's settings as its folder records them and a resume compares them: what the export
    fixes (workload, size, target, the noise-scale meter's slices), the LR rule resolved as the
    torch trainer resolves it, and the exported folder, which says the trainer."""
    return dataclasses.replace(config, workload=manifest.workload, size=manifest.size, target=manifest.target,
                               exported=str(folder), lr=resolve_lr(config.lr, manifest.lr_reference_batch),
                               noise_scale="on" if plan.sliced is not None else "off",
                               noise_scale_micro_batches=plan.sliced.parts if plan.sliced is not None else 1)


def train_exported(folder: Path, config: TrainConfig) -> int:
    """Check every input (the flags, the folder's manifest, programs and state, the data, the run
    folder and what a resume continues), then write the run folder and train; the rows and
    summary go to `config.out_dir`. A refusal leaves no run folder, and a run's folder as it was."""
    refuse_unsupported(config)
    if config.data is None:
        raise UsageError("train --exported: give --data SHARDS (the shard folder of the exported workload)")
    config.validate()
    steps = ExportedSteps.open(folder, None if config.workload == DEFAULTS.workload else config.workload)
    manifest = steps.manifest
    refuse_drawn_state(manifest, folder)
    if config.size is not None and config.size != manifest.size:
        raise UsageError(f"train --exported: the folder holds size {manifest.size} of {manifest.workload}, not "
                         f"--size {config.size}; drop --size or export that size")
    data = ShardSet.open(Path(config.data), manifest, config.seed)
    plan = _plan(config, manifest, data, folder)
    steps.verify([plan.batch_size], state_and_batch=False)
    steps.initial_arrays()
    manifest_sha256 = sha256_of(read_regular(folder / MANIFEST, f"--exported {folder}/{MANIFEST}", MAX_MANIFEST_BYTES))
    settings = recorded_settings(config, manifest, plan, folder)
    run_dir = Path(config.out_dir)
    check_run_folder(run_dir, settings)
    check_writable_directory(run_dir, f"--out {run_dir}")
    data_read = loader_record(data)
    with hold_run_lock(run_dir):
        continuation: Continuation | None = Continuation(None)
        if config.resume:
            check_same_data(run_dir, data_read, config.data)
            continuation = plan_resume(run_dir, settings, manifest, manifest_sha256, plan.total_steps)
            if continuation is None:
                return 0  # the run had finished
        run = ExportedRun(config, steps, data, plan, " ".join(sys.argv), manifest_sha256)
        run.start(continuation.point)
        if config.resume:
            continue_run(run_dir, continuation)
        atomic_write_text(run_dir / CONFIG_FILE, settings.to_json() + "\n")
        record_data(run_dir, data_read)
        on = jaxrt.device().device_kind + (f" x {manifest.devices}" if manifest.devices else "")
        print(f"train: {manifest.workload}/{manifest.size} exported {manifest.target} on {on}, "
              f"batch {plan.batch_size}, {plan.total_steps} steps; {plan.rates.line()}", flush=True)
        summary = run.run()
        summary.write(run_dir)
        append_line(run_dir / METRICS_FILE, json.dumps(row_record(summary), sort_keys=True))
    for line in summary.lines():
        print(line, flush=True)
    return 0


__all__ = ["train_exported", "refuse_unsupported"]
