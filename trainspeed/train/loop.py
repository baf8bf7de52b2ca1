"""The training loop of one rank: read a batch, move it, step, log, checkpoint, validate.

Every rank runs this same function (torchrun starts one process per device; an XLA SPMD run is one
process driving all of the host's devices). The steps are identical on every rank, so collectives
(the gradient all-reduce, the metric reductions, the stop vote) always line up.

Timing follows the study's definition of end-to-end throughput: the wall time from the first to the
last step across all ranks (a barrier and a device sync on both ends), without the pauses for
validation and checkpoints, which are reported apart. The steady-state rate leaves out the first
`timing_warmup_steps` steps (compilation, loader start-up) and is the one compared with the bench.

With a batch schedule (`trainspeed.train.batch_schedule`) a step reads as many of the loader's
batches as its global batch holds, steps over micro-batches past the memory cap, and a switch closes
the logged window and changes the LR, the meter's batches and the micro-batches. The first
`timing_warmup_steps` steps at a new batch (at least one) settle it, as the run's first steps do:
they compile the new shape (and, on a compiled target, the graphs a second step differs by), so they
are timed apart, with a sync on either side, kept out of the steady-state samples/s, and their
compilations go into the `batch-switch` row written after them. Every `train` row counts the
compilations of its window.

A run whose training loss is not finite has diverged (`RankTrainer._watch_losses`): it stops at
the first logged window, checkpoint or validation after that step, validates and checkpoints none
of the diverged weights, and its summary records the step (`diverged_at_step`); it exits as a run
that ended, since a diverged run is a result (an LR sweep's largest rate), not a failure.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.per_device import PerDeviceLoader
from trainspeed.errors import UsageError
from trainspeed.gradients.accumulation import GradientAccumulation, batch_size
from trainspeed.gradients.noise_scale import NoiseScaleMeter
from trainspeed.gradients.rows import summary_fields
from trainspeed.machine import Machine
from trainspeed.targets import get_target
from trainspeed.targets.base import BatchPlacer, Target
from trainspeed.targets.threads import configure_threads
from trainspeed.train.batch_schedule import (
    AUTO,
    BatchPlan,
    RunLength,
    bench_step_seconds,
    first_reading_steps,
    least_reading,
    loader_unit,
    micro_batches_for,
    noise_reading,
    run_length,
    window_step_time,
)
from trainspeed.train.checkpoint import capture_rng_states, make_checkpoint_latest, save_checkpoint
from trainspeed.train.config import TrainConfig
from trainspeed.train.distributed import Collectives, RankContext
from trainspeed.train.evaluation import can_evaluate, evaluate
from trainspeed.train.init_from import start_from
from trainspeed.train.lifecycle import StopRequest
from trainspeed.train.lr_schedule import (
    LearningRates,
    build_sample_schedulers,
    build_schedulers,
    current_lr,
    first_group_lrs,
    refresh_lrs,
    warmup_samples,
)
from trainspeed.train.metrics import MetricsLog, StepWindow, reduce_window
from trainspeed.train.parallel import make_data_parallel
from trainspeed.train.progress import ProgressBar
from trainspeed.train.resume import RankParts, read_plan, restore
from trainspeed.train.rows import (
    BatchSwitchRecord,
    EvalRecord,
    RunSummary,
    ScheduleSummary,
    SwitchEntry,
    TimeToTargetRecord,
    WindowRecord,
)
from trainspeed.train.startup import seconds_since_start
from trainspeed.train.summary import bench_samples_per_s
from trainspeed.train.synthetic import SyntheticLoader
from trainspeed.train.time_to_target import RunTotals, TargetTracker, parse_goal
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import Batch, Trainable, Workload
from trainspeed.workloads.identity import identify


HOST_EVALUATION_TARGET = "cpu:eager:fp32"
"""Where a remote target's validation runs, on a host copy of the server's weights."""


@dataclass(frozen=True)
class Layout:
    """How the global batch maps onto processes and devices."""

    context: RankContext
    devices_per_process: int = 1
    """1 with torchrun (one process per device); all local devices in an XLA SPMD process."""
    program_spans_processes: bool = False
    """One compiled program over the devices of every process (the jax family's `--nnodes`): each
    process validates its own part of the validation split on a host copy of the networks, as a
    rank does, since a step over all processes would need every process's batch at once."""

    @property
    def devices(self) -> int:
        return self.context.world_size * self.devices_per_process


@dataclass
class LoopState:
    step: int = 0
    """Optimizer steps completed."""
    epoch: int = 0
    samples: int = 0
    """Samples trained by those steps (every rank's)."""


@dataclass
class RunClock:
    """Host time of this invocation, with validation and checkpoint pauses kept apart."""

    started_at: float = 0.0
    cpu_started_at: float = 0.0
    """This process's CPU time at `started_at`."""
    steady_started_at: float | None = None
    steady_first_step: int = 0
    steady_first_samples: int = 0
    steady_excluded_s: float = 0.0
    """The steps that settled each new batch of a schedule (`Settling`), kept out of steady samples/s."""
    steady_excluded_samples: int = 0
    paused_s: float = 0.0
    steady_paused_s: float = 0.0
    data_wait_s: float = 0.0
    steady_data_wait_s: float = 0.0
    h2d_samples: list[float] = field(default_factory=list)
    totals_before: RunTotals = field(default_factory=RunTotals)
    """The run's seconds before this invocation (from the checkpoint it resumed from)."""
    pause_started_at: float | None = None
    """Where the pause under way began (a checkpoint, a validation, the run's end), or None."""

    def run_train_s(self, now: float) -> float:
        """Training seconds of the run at `now`; a pause under way is not training."""
        trained_until = now if self.pause_started_at is None else min(now, self.pause_started_at)
        return self.totals_before.train_s + trained_until - self.started_at - self.paused_s

    def run_wall_s(self, now: float) -> float:
        return self.totals_before.wall_s + now - self.started_at

    def totals(self, now: float) -> RunTotals:
        return dataclasses.replace(self.totals_before, train_s=self.run_train_s(now), wall_s=self.run_wall_s(now))

    def add_pause(self, seconds: float) -> None:
        self.paused_s += seconds
        if self.steady_started_at is not None:
            self.steady_paused_s += seconds

    def add_data_wait(self, seconds: float) -> None:
        self.data_wait_s += seconds
        if self.steady_started_at is not None:
            self.steady_data_wait_s += seconds


@dataclass
class RunTrace:
    """What one invocation of `RankTrainer.run` accumulates: timings, pending losses, last records."""

    first_step: int
    clock: RunClock = field(default_factory=RunClock)
    window: StepWindow = field(default_factory=StepWindow)
    losses: list[torch.Tensor] = field(default_factory=list)
    """Device losses of the open window, read once at its end (reading each would sync every step)."""
    last_record: WindowRecord | None = None
    last_eval: EvalRecord | None = None
    machine: Machine | None = None
    """The machine at the first step (the summary completes it at the last)."""
    startup_s: float | None = None
    first_samples: int = 0
    compiles_at_start: int = 0
    window_compiles_at_start: int = 0
    settling: Settling | None = None
    diverged_at: int | None = None
    """The first step whose training loss was not finite, on any rank (`RankTrainer._watch_losses`);
    None while every loss read was a number."""


@dataclass
class Settling:
    """The steps that settle a schedule's new batch (module docstring): through `last_step`, timed
    from `started_at` (None until the steady clock runs) less the pauses in between."""

    last_step: int
    compiles_at_start: int
    started_at: float | None = None
    steady_paused_at_start: float = 0.0
    samples: int = 0


class BatchStream:
    """The loader's batches across epoch boundaries (a new epoch reshuffles)."""

    def __init__(self, loader: BatchLoader, state: LoopState, pin_memory: bool = False) -> None:
        self._loader = loader
        self._state = state
        self._pin_memory = pin_memory
        self._batches: Iterator[Batch] = iter(loader)

    def next(self, units: int = 1) -> Batch:
        """The next `units` of the loader's batches as one: consecutive global batches of the epoch's
        order. Where the epoch ends before `units` batches, the next epoch starts and its first
        `units` are taken (the rest of the ended epoch is not trained, as a fixed batch drops its
        last incomplete global batch)."""
        parts: list[Batch] = []
        fresh = False
        while len(parts) < units:
            try:
                parts.append(next(self._batches))
            except StopIteration:
                if fresh:
                    raise UsageError("train: the training split has fewer samples than one global batch") from None
                self._state.epoch += 1
                self._loader.set_epoch(self._state.epoch)
                self._batches = iter(self._loader)
                parts.clear()
                fresh = True
        if units == 1:
            return parts[0]
        joined = {key: torch.cat([part[key] for part in parts]) for key in parts[0]}
        return {key: tensor.pin_memory() for key, tensor in joined.items()} if self._pin_memory else joined


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)



def open_loader(
    workload: Workload, config: TrainConfig, layout: Layout, target: Target, split: str,
    batch_size_per_device: int | None = None,
) -> BatchLoader:
    """This rank's loader of `split` at `batch_size_per_device` (the run's by default). A process
    that drives several devices with one program trains on one loader per device, each reading its
    device's slice of every batch with its own workers (`PerDeviceLoader`); its validation, which
    runs on a host copy of the networks, reads through one."""
    per_device = batch_size_per_device or config.batch_size_per_device
    loader_config = LoaderConfig(
        batch_size=per_device * layout.devices_per_process,
        rank=layout.context.rank,
        world_size=layout.context.world_size,
        seed=config.seed,
        split=split,
        num_workers=config.num_workers,
        pin_memory=target.pin_memory,
        shuffle=split == "train",
        drop_last=split == "train",
        bad_samples=config.bad_samples,
    )
    if config.synthetic_data:
        return SyntheticLoader(workload, config.size, loader_config)
    if split == "train" and layout.devices_per_process > 1:
        return PerDeviceLoader.open(loader_config, layout.devices_per_process,
                                    lambda device_config: workload.open_dataset(config.data, config.size, device_config))
    return workload.open_dataset(config.data, config.size, loader_config)


def network_buffers(trainable: Trainable) -> dict[str, dict[str, torch.Tensor]]:
    """Every buffer of every network, on the host. Parameters are equal on every rank (each step
    applies the same averaged gradients); buffers need not be: running statistics a network keeps
    from its own rank's batches (StyleGAN3's magnitude EMAs and w_avg) are not averaged, so each rank's
    are checkpointed apart from rank 0's `trainable` state and restored on that rank. None, where
    the trainable's state holds them (`Trainable.buffers_in_networks`)."""
    if not trainable.buffers_in_networks:
        return {}
    return {name: {key: buffer.detach().to("cpu", copy=True) for key, buffer in network.named_buffers()}
            for name, network in trainable.networks.items()}


def checkpoint_payload(
    config: TrainConfig,
    state: LoopState,
    trainable: Trainable,
    schedulers: dict[str, Any],
    rank_parts: list[dict[str, Any]],
    totals: RunTotals,
    tracker: TargetTracker | None,
    plan: BatchPlan | None = None,
) -> dict[str, Any]:
    return {
        "run_clock": totals.as_state(),
        "time_to_target": tracker.as_state() if tracker is not None else None,
        "step": state.step,
        "epoch": state.epoch,
        "samples": state.samples,
        "batch_schedule": plan.state() if plan is not None else None,
        "world_size": len(rank_parts),
        "global_batch": plan.global_batch if plan is not None else config.global_batch,
        "trainable": trainable.state_dict(),
        "schedulers": {name: scheduler.state_dict() for name, scheduler in schedulers.items()},
        "ranks": rank_parts,
        "config": config.to_json(),
    }


class RankTrainer:
    """Holds one rank's run: built once, then `run()` steps to the end (or to a stop request)."""

    def __init__(
        self,
        config: TrainConfig,
        layout: Layout,
        collectives: Collectives,
        target: Target,
        place: BatchPlacer | None = None,
    ) -> None:
        """`place` copies a host batch to the device(s); the target's `move_batch` by default
        (an SPMD run passes the target's sharding placer)."""
        self.config = config
        self.layout = layout
        self.context = layout.context
        self.collectives = collectives
        configure_threads(config.threads)
        seed_everything(config.seed)
        self.target = target
        self.workload = get_workload(config.workload)
        self.trainable = self.target.build(self.workload, config.size, config.seed)
        self.plan = (BatchPlan.of(config, config.batch.max_batch_per_device, self._bench_step_seconds())
                     if config.batch.schedule else None)
        self.parts = self._parts_at(self.global_batch)
        """Micro-batches each step runs over (one optimizer step)."""
        self.meter = self._noise_scale_meter()
        self.gradient_sync = make_data_parallel(self.trainable, self.target, self.context, self.meter)
        self.accumulation = GradientAccumulation(self.trainable)
        if self.meter is not None:
            self.meter.accumulate_with(self.accumulation)
        self.tracker = TargetTracker(parse_goal(config.until), config.until) if config.until else None
        self.totals_before = RunTotals()
        self.reached_now = False
        self.place: BatchPlacer = place or self.target.move_batch
        self.unit = loader_unit(config) if self.plan is not None else config.batch_size_per_device
        """The per-device batch the training loader reads; a step reads `global batch / devices / unit` of them."""
        self.train_loader = open_loader(self.workload, config, layout, self.target, "train", self.unit)
        self.evaluated = self._evaluated_trainable()
        self.val_loader = self._open_val_loader()
        self.length = self._run_length()
        self.total_steps = self.length.total_steps
        self.state = LoopState()
        self._step_batch = self.global_batch
        """The global batch of the last step (`_is_eval_due` counts its samples)."""
        self._last_reading: dict[str, Any] = {}
        workload_lrs = first_group_lrs(self.trainable.optimizers)
        if self.plan is None:
            self.schedulers = build_schedulers(self.trainable.optimizers, config.lr, self.global_batch, self.length.total_steps)
            self.learning_rates = LearningRates.derive(workload_lrs, config.lr, self.global_batch, self.length.total_steps)
        else:
            start, total = self.global_batch, self.length.total_samples
            self.schedulers = build_sample_schedulers(self.trainable.optimizers, config.lr, start, total,
                                                      progress=lambda: (self.state.samples, self.global_batch))
            self.learning_rates = dataclasses.replace(
                LearningRates.derive(workload_lrs, config.lr, start, max(1, round(total / start))),
                warmup_samples=warmup_samples(config.lr, total, start))
        if self.context.is_main:
            print(self.learning_rates.line(), flush=True)
        if self.layout.program_spans_processes and config.resume:
            self._check_same_start(read_plan(config.run_dir).step)
        restored = restore(config.run_dir, self._resumed_parts()) if config.resume else None
        # A run started from another run's checkpoint loads it unless it continues from its own.
        self.started_from = (start_from(config, self.trainable if restored is None else None)
                             if config.init_from is not None else None)
        if restored is not None:
            self.state = LoopState(step=restored.step, epoch=restored.epoch, samples=restored.samples)
            self.totals_before = restored.totals
            self._follow_batch()
            self._step_batch = self.global_batch
        else:
            # Each rank draws its own random numbers (dropout, augmentation) after the shared init.
            seed_everything(config.seed * 1_000_003 + 7919 * self.context.rank + 1)
            self.train_loader.set_epoch(0)
        # TensorBoard hides what a killed run logged after the checkpoint this run resumes from.
        purge_step = None if restored is None else restored.step + 1
        self.metrics = MetricsLog(config.run_dir, enabled=self.context.is_main, purge_step=purge_step)

    def _check_same_start(self, step: int) -> None:
        """The processes of one program over several hosts continue from one step, each from its own
        copy of the checkpoint (step 0: none); UsageError where their resume plans differ (a process
        killed between writing its copy and pointing `latest` at it), before any of them loads one
        (loading puts the state on every process's devices, which all of them take part in)."""
        lowest, highest = -self.collectives.max([-float(step)])[0], self.collectives.max([float(step)])[0]
        if lowest != highest:
            said = " to ".join("no checkpoint" if value == 0 else f"step {value:.0f}" for value in (lowest, highest))
            raise UsageError(f"train: the run's processes would continue from different checkpoints ({said}); give "
                             "every process's run folder the same latest checkpoint (copy one process's checkpoints folder "
                             "to the others), then --resume again")

    @property
    def global_batch(self) -> int:
        """The global batch of the next step (a schedule's current one)."""
        if self.plan is not None:
            return self.plan.global_batch
        return self.config.batch_size_per_device * self.layout.devices

    @property
    def batch_size_per_device(self) -> int:
        return self.global_batch // self.layout.devices

    @property
    def samples(self) -> int:
        """Samples of the run so far (every invocation)."""
        return self.state.samples

    # --- set-up ----------------------------------------------------------------------------------
    def _parts_at(self, global_batch: int, measured: bool = True) -> int:
        """The micro-batches of a step at `global_batch`: the noise scale's slices where `measured`
        (a step the meter measures); with a schedule, as many more as keep each within the memory cap."""
        at_least = self.config.noise_scale_micro_batches if measured else 1
        if self.plan is None:
            return at_least
        return micro_batches_for(global_batch // self.layout.devices, self.config.batch.max_batch_per_device,
                                 at_least=at_least)

    def _bench_step_seconds(self) -> tuple[tuple[int, float], ...]:
        """auto's step times from --bench-jsonl (`bench_step_seconds`); () without the file or auto."""
        if self.config.batch.schedule != AUTO or not self.config.bench_jsonl:
            return ()
        assert self.config.size is not None
        return bench_step_seconds(self.config.bench_jsonl, self.workload.name, self.config.size, self.config.target)

    def _run_length(self) -> RunLength:
        if self.plan is None:
            steps = self.config.total_steps(None if self.config.synthetic_data else len(self.train_loader))
            return RunLength(total_samples=steps * self.global_batch, total_steps=steps)
        return run_length(self.config, None if self.config.synthetic_data else self.train_loader.num_samples)

    def _follow_batch(self) -> None:
        """Step at the schedule's current batch: its micro-batches and the meter's batches."""
        self.parts = self._parts_at(self.global_batch)
        if self.meter is not None:
            self.meter.resize(self.batch_size_per_device * self.layout.devices_per_process, self.parts,
                              self._parts_at(self.global_batch, measured=False))

    def _noise_scale_meter(self) -> NoiseScaleMeter | None:
        if self.config.noise_scale == "off":
            return None
        over_slices = self.target.slices_in_step and self.config.noise_scale_micro_batches > 1
        if not self.target.gradients_here and not over_slices:
            if self.context.is_main:
                told = ("; its own step measures it over micro-batches: give --noise-scale-micro-batches 2 (or more)"
                        if self.target.slices_in_step else "")
                print(f"train: the gradient noise scale is not measured on {self.config.target}: its gradients "
                      f"stay {self.target.gradients_where}{told}", flush=True)
            return None
        return NoiseScaleMeter(self.trainable, world_size=self.context.world_size,
                               samples_per_rank=self.batch_size_per_device * self.layout.devices_per_process,
                               micro_batches=self.parts, smoothing=self.config.noise_scale_smoothing,
                               seed=self.config.seed, every=self.config.noise_scale_every,
                               dense_steps=first_reading_steps(self.config),
                               plain_parts=self._parts_at(self.global_batch, measured=False))

    def _open_val_loader(self) -> BatchLoader | None:
        if self.config.synthetic_data or self.evaluated is None:
            return None
        cap = self.config.batch.max_batch_per_device
        per_device = self.config.batch_size_per_device if cap is None else min(cap, self.config.batch_size_per_device)
        return open_loader(self.workload, self.config, self.layout, self.target, "val", per_device)

    def _evaluated_trainable(self) -> Trainable | None:
        """What validation runs on: the trained networks; or, where they live on a remote server or
        their program spans processes (`Layout.program_spans_processes`), a host copy of the
        workload that each validation loads the trained weights into."""
        if can_evaluate(self.trainable) and not self.layout.program_spans_processes:
            return self.trainable
        if self.target.gradients_here:
            return None
        copy = self.workload.build(self.config.size, self.config.seed)
        return copy if can_evaluate(copy) else None

    def _resumed_parts(self) -> RankParts:
        """What this rank's part of a checkpoint restores (`trainspeed.train.resume.restore`)."""
        return RankParts(rank=self.context.rank, trainable=self.trainable, schedulers=self.schedulers,
                         loader=self.train_loader, target=self.target, tracker=self.tracker, meter=self.meter,
                         plan=self.plan)

    # --- periodic work -------------------------------------------------------------------------
    def save(self, clock: RunClock) -> None:
        rank_part = {"loader": self.train_loader.state_dict(), "rng": capture_rng_states(self.target),
                     "buffers": network_buffers(self.trainable)}
        if self.meter is not None:
            rank_part["noise_scale"] = self.meter.state()
        parts = self.collectives.gather_objects(rank_part)
        each_process = self.layout.program_spans_processes  # each holds the whole state: each keeps a copy
        if self.context.is_main or each_process:
            payload = checkpoint_payload(self.config, self.state, self.trainable, self.schedulers, parts,
                                         clock.totals(time.perf_counter()), self.tracker, self.plan)
            save_checkpoint(self.config.run_dir, self.state.step, payload, keep=self.config.keep_checkpoints,
                            make_latest=not each_process)
        self.collectives.barrier()
        if each_process:
            make_checkpoint_latest(self.config.run_dir, self.state.step, keep=self.config.keep_checkpoints)

    def validate(self, clock: RunClock) -> EvalRecord | None:
        """Validate, and watch the record for the --until goal (`reached_now` turns True at the
        validation that first meets it, which writes its time-to-target row)."""
        train_s = clock.run_train_s(time.perf_counter())
        record = self._validate()
        if record is not None and self.tracker is not None:
            if self.tracker.observe(record, self.samples, train_s, clock.run_wall_s(time.perf_counter())):
                self.metrics.write(self._target_record(clock), self.state.step)
                self.reached_now = True
        return record

    def _target_record(self, clock: RunClock) -> TimeToTargetRecord:
        assert self.tracker is not None
        return self.tracker.record(clock.totals(time.perf_counter()), step=self.state.step, samples=self.samples,
                                   global_batch=self._step_batch, world_size=self.layout.devices,
                                   target=self.config.target)

    def _validate(self) -> EvalRecord | None:
        if self.val_loader is None or self.evaluated is None:
            return None
        target, place = self.target, self.place
        if self.evaluated is not self.trainable:
            networks = self.trainable.state_dict()["networks"]
            for name, network in self.evaluated.networks.items():
                network.load_state_dict(networks[name])
            target = get_target(HOST_EVALUATION_TARGET)
            place = target.move_batch
        record = evaluate(
            self.evaluated,
            self.val_loader,
            target,
            place,
            self.collectives,
            step=self.state.step,
            max_batches=self.config.eval_batches,
        )
        if record is None:
            if self.context.is_main:
                print("train: the validation split is empty (too few games); no validation", flush=True)
            self.val_loader = None
            return None
        self.metrics.write(record.as_row(), self.state.step)
        return record

    def _done(self) -> bool:
        return self.length.done(self.state.step, self.state.samples)

    def _is_due(self, every: int) -> bool:
        return every > 0 and self.state.step % every == 0 and not self._done()

    def _is_eval_due(self) -> bool:
        return not self._done() and self.config.is_eval_due(self.state.step, self.state.samples - self._step_batch,
                                                            self.state.samples)

    # --- the loop --------------------------------------------------------------------------------
    def run(self, stop: StopRequest) -> RunSummary:
        trace = RunTrace(first_step=self.state.step, first_samples=self.state.samples)
        trace.clock.totals_before = self.totals_before
        self.reached_now = False
        stream = BatchStream(self.train_loader, self.state, pin_memory=self.target.pin_memory)
        progress = self._progress_bar()
        self.collectives.barrier()
        self.target.sync()
        trace.machine = Machine.at_start()
        trace.startup_s = seconds_since_start()
        trace.compiles_at_start = self.target.compile_count()
        trace.clock.started_at, trace.clock.cpu_started_at = time.perf_counter(), time.process_time()
        trace.window = StepWindow()
        trace.window_compiles_at_start = trace.compiles_at_start
        stopped = False
        self._switch_if_due(trace)
        while not self._done() and not stopped:
            if self.state.step - trace.first_step == self.config.timing_warmup_steps:
                self._start_steady_clock(trace)
            self._train_one_step(stream, trace)
            progress.advance(1 if self.total_steps is not None else self._step_batch)
            if self.state.step % self.config.log_every == 0 or self._done():
                self._close_window(trace)
                progress.show(loss=trace.last_record.loss, samples_per_s=trace.last_record.samples_per_s)
            if trace.diverged_at is None:
                self._switch_if_due(trace)
            stopped = self.collectives.any(stop.requested)
            self._between_steps(trace, stopped)
            if trace.diverged_at is not None or (self.reached_now and self.config.stop_at_target):
                break
        diverged = trace.diverged_at is not None
        if diverged and trace.window.steps:  # found before a checkpoint or a validation: its steps' row
            self._close_window(trace)
        if trace.settling is not None and not stopped:  # ended (at its goal) while a new batch settled
            self._end_settling(trace)
        self.target.sync()
        self.collectives.barrier()
        ended_at = time.perf_counter()
        trace.clock.pause_started_at = ended_at
        progress.close()
        at_target = self.reached_now and self.config.stop_at_target
        if at_target and self.context.is_main:
            print(f"train: {self.config.until} met at step {self.state.step}; stopping (--stop-at-target)", flush=True)
        if not stopped and not at_target and not diverged:
            trace.last_eval = self.validate(trace.clock) or trace.last_eval
        if not stopped and not diverged:  # a diverged run's weights are no state to continue from
            self.save(trace.clock)
        if self.tracker is not None and self.tracker.reached is None and self.context.is_main:
            self.metrics.write(self._target_record(trace.clock), self.state.step)
        summary = self._summarise(trace, ended_at, stopped)
        if self.context.is_main:
            summary.write(self.config.run_dir)
            self.metrics.write(summary, self.state.step)
        self.metrics.close()
        return summary

    def _progress_bar(self) -> ProgressBar:
        """In steps; in samples where the steps are not known in advance (auto)."""
        enabled = self.config.progress and self.context.is_main
        if self.total_steps is not None:
            return ProgressBar(self.total_steps, self.state.step, enabled)
        return ProgressBar(self.length.total_samples, self.state.samples, enabled, unit="sample")

    def _start_steady_clock(self, trace: RunTrace) -> None:
        """The steady state starts after `timing_warmup_steps` steps (at once when that is 0)."""
        self.target.sync()
        trace.clock.steady_started_at = time.perf_counter()
        trace.clock.steady_first_step = self.state.step
        trace.clock.steady_first_samples = self.state.samples
        if trace.settling is not None:  # the steady clock starts while a new batch settles
            trace.settling.started_at = trace.clock.steady_started_at
            trace.settling.steady_paused_at_start = trace.clock.steady_paused_s

    def _train_one_step(self, stream: BatchStream, trace: RunTrace) -> None:
        waited_from = time.perf_counter()
        host_batch = stream.next(self.batch_size_per_device // self.unit)
        data_wait_s = time.perf_counter() - waited_from
        batch, h2d_s = self._place(host_batch, timed=trace.window.wants_h2d_sample)
        if self.plan is not None and self.plan.pending is not None and trace.settling is None:
            self._start_settling(trace)
        parts, partition = (self.parts, None) if self.meter is None else self.meter.split(self.state.step,
                                                                                          batch_size(batch))
        trace.losses.append(self.accumulation.run(lambda part: self.target.run_step(self.trainable, part), batch,
                                                  parts, partition))
        self.state.step += 1
        self.state.samples += self.global_batch
        self._step_batch = self.global_batch
        for scheduler in self.schedulers.values():
            scheduler.step()
        if trace.settling is not None:
            trace.window.holds_switch = True
            if trace.settling.started_at is not None:
                trace.settling.samples += self.global_batch
            if self.state.step >= trace.settling.last_step or self._done():
                self._end_settling(trace)
        trace.window.add_step(data_wait_s, h2d_s, self.global_batch, parts)
        trace.clock.add_data_wait(data_wait_s)
        if h2d_s is not None:
            trace.clock.h2d_samples.append(h2d_s)

    def _start_settling(self, trace: RunTrace) -> None:
        """Time the steps that settle the new batch apart from here (a sync first)."""
        self.target.sync()
        settling = Settling(last_step=self.state.step + max(1, self.config.timing_warmup_steps),
                            compiles_at_start=self.target.compile_count())
        if trace.clock.steady_started_at is not None:
            settling.started_at, settling.steady_paused_at_start = time.perf_counter(), trace.clock.steady_paused_s
        trace.settling = settling

    def _end_settling(self, trace: RunTrace) -> None:
        """The new batch settled (or the run ends, or switches again): keep its steps out of the
        steady samples/s, and write the switch's row with their compilations."""
        settling = trace.settling
        assert settling is not None and self.plan is not None and self.plan.pending is not None
        self.target.sync()
        clock = trace.clock
        if settling.started_at is not None:
            clock.steady_excluded_s += (time.perf_counter() - settling.started_at
                                        - (clock.steady_paused_s - settling.steady_paused_at_start))
            clock.steady_excluded_samples += settling.samples
        trace.settling = None
        self._write_switch(trace, self.plan.pending, self.target.compile_count() - settling.compiles_at_start)

    def _place(self, host_batch: Batch, timed: bool) -> tuple[Batch, float | None]:
        """Copy the batch to the device; when `timed`, fence the copy with syncs and time it."""
        if not timed:
            return self.place(host_batch), None
        self.target.sync()
        copy_from = time.perf_counter()
        batch = self.place(host_batch)
        self.target.sync()
        return batch, time.perf_counter() - copy_from

    def _close_window(self, trace: RunTrace) -> None:
        """Read the window's mean loss (after a device sync: a device whose results arrive later,
        such as a remote server with steps in flight, has filled them in only then), watch it for
        divergence, reduce its timings over ranks, log them; auto reads the noise scale of the window."""
        self.target.sync()
        losses = self._watch_losses(trace)
        loss = float(losses.mean())
        trace.last_record = reduce_window(
            trace.window,
            self.collectives,
            step=self.state.step,
            epoch=self.state.epoch,
            loss=loss,
            lr=current_lr(self.trainable.optimizers),
            global_batch=self._step_batch,
            elapsed_s=time.perf_counter() - trace.clock.started_at - trace.clock.paused_s,
            run_train_s=trace.clock.run_train_s(time.perf_counter()),
            run_wall_s=trace.clock.run_wall_s(time.perf_counter()),
            samples=self.state.samples,
        )
        records = [] if self.meter is None else self.meter.read_window(self.state.step, self.samples,
                                                                       self.collectives.sum)
        compiles = self.target.compile_count()  # the window's steps' and its noise-scale reading's
        trace.last_record = dataclasses.replace(trace.last_record,
                                                compilations=compiles - trace.window_compiles_at_start)
        trace.window_compiles_at_start = compiles
        self.metrics.write(trace.last_record, self.state.step)
        for record in records:
            self.metrics.write(record, self.state.step)
        if self._times_steps:
            self._time_window(trace)
        if records and self.plan is not None and self.plan.rule is not None:
            self._read_noise_scale(records)
        trace.losses.clear()
        trace.window = StepWindow()

    @property
    def _times_steps(self) -> bool:
        """auto weighs the step times this run measures (`--auto-step-times run`)."""
        return self.plan is not None and self.plan.rule is not None and self.config.batch.auto_step_times == "run"

    def _time_window(self, trace: RunTrace) -> None:
        """Give auto the closed window's step time (the slowest rank's, the same on every rank) as a
        point of t(B), where its steps ran after the timing warm-up, compiled nothing and settled no
        new batch (`window_step_time` says which batch the point is at)."""
        window, record = trace.window, trace.last_record
        assert self.plan is not None and record is not None
        first_step = self.state.step - window.steps
        if first_step < trace.first_step + self.config.timing_warmup_steps or record.compilations or window.holds_switch:
            return
        self.plan.time_window(window_step_time(self._step_batch, window.steps, window.split_steps, window.parts,
                                               record.step_time_s))

    def _watch_losses(self, trace: RunTrace) -> torch.Tensor:
        """The open window's losses, on the host (a sync: call it where one happens anyway), and
        the first step whose loss is not finite on any rank into `trace.diverged_at`, the same on
        every rank. A run stops there: a NaN or infinite loss never turns finite again (the weights
        it stepped are NaN or infinite), so training on only spends time and writes NaN rows. The
        losses are read at each logged window and before each checkpoint and validation, never
        per step (a read syncs the device): the run stops at the first of those after the step."""
        losses = torch.stack(trace.losses).float().cpu() if trace.losses else torch.zeros(0)
        if trace.diverged_at is not None:
            return losses
        bad = (~torch.isfinite(losses)).nonzero().flatten()
        first = self.state.step - len(trace.losses) + 1 + int(bad[0]) if len(bad) else None
        if self.collectives.any(first is not None):
            (earliest,) = self.collectives.max([-float(first if first is not None else self.state.step)])
            trace.diverged_at = int(-earliest)
        return losses

    def _read_noise_scale(self, records: list[Any]) -> None:
        """auto's reading of the window: the batch of the steps after it, the same on every rank."""
        assert self.plan is not None
        reading = least_reading([noise_reading(record) for record in records])
        if reading is None:
            return
        decision = self.plan.read(reading, self.state.samples)
        (agreed,) = self.collectives.max([float(decision.global_batch)])
        self.plan.next_global_batch = int(agreed)
        self._last_reading = {"b_simple": reading.b_simple, "b_simple_lower": reading.lower,
                              "resolved": reading.resolved, "calibration": decision.calibration,
                              "critical_batch": None if decision.critical_batch == float("inf")
                              else decision.critical_batch, "critical_batch_low": decision.critical_batch_low,
                              "confident": decision.confident, "timed": decision.timed,
                              "timed_by": decision.timed_by,
                              "step_times": ([[batch, seconds] for batch, seconds in self.plan.step_times]
                                             if self._times_steps else None)}

    def _switch_if_due(self, trace: RunTrace) -> None:
        """Switch to the schedule's due batch before the next step: a window holds steps of one
        batch, the LR follows the rule, the micro-batches and the meter the new per-device batch; the
        switch's row waits for the first step at the new batch."""
        if self.plan is None or self._done() or self.plan.due(self.state.samples) == self.plan.global_batch:
            return
        if trace.window.steps:
            self._close_window(trace)
        if trace.settling is not None:
            self._end_settling(trace)
        lr_before = current_lr(self.trainable.optimizers)
        made = self.plan.switch(self.state.step, self.state.samples)
        refresh_lrs(self.schedulers)
        self._follow_batch()
        auto = self.plan.rule is not None
        self.plan.pending = {
            "step": made.step, "samples": made.samples, "from_global_batch": made.from_global_batch,
            "to_global_batch": made.to_global_batch, "batch_size_per_device": self.batch_size_per_device,
            "micro_batches": self.parts, "lr_before": lr_before, "lr_after": current_lr(self.trainable.optimizers),
            "lr_scaling": self.config.lr.scaling or "none", "reference_batch": self.config.lr.reference_batch,
            "reason": "auto" if auto else "schedule", **(self._last_reading if auto else {})}

    def _write_switch(self, trace: RunTrace, pending: dict[str, Any], compilations: int) -> None:
        """The switch's row, once the new batch settled (a checkpoint before that carries it in the
        schedule's state, so a resumed run writes it)."""
        assert self.plan is not None
        record = BatchSwitchRecord(**pending, compilations=compilations, last_step=self.state.step,
                                   compilations_total=self.target.compile_count() - trace.compiles_at_start)
        self.plan.pending = None
        self.metrics.write(record, self.state.step)
        if self.context.is_main:
            print(record.line(), flush=True)

    def _between_steps(self, trace: RunTrace, stopped: bool) -> None:
        """Checkpoint and validate when due (or checkpoint on a stop), off the training clock;
        neither once the run diverged."""
        pause_from = time.perf_counter()
        trace.clock.pause_started_at = pause_from
        checkpoint = stopped or self._is_due(self.config.checkpoint_every)
        validation = not stopped and self._is_eval_due()
        if checkpoint or validation:  # never of weights a non-finite loss stepped
            self.target.sync()
            self._watch_losses(trace)
        if trace.diverged_at is None and checkpoint:
            self.save(trace.clock)
        if trace.diverged_at is None and validation:
            trace.last_eval = self.validate(trace.clock) or trace.last_eval
        pause_s = time.perf_counter() - pause_from
        trace.clock.add_pause(pause_s)
        trace.clock.pause_started_at = None
        trace.window.started_at += pause_s

    def _data_record(self) -> dict | None:
        """What the run read, as its training loader says (`data_record`: format, files, fingerprint),
        with the samples every rank's loaders skipped; None where the loader records nothing."""
        records = [getattr(loader, "data_record", None) for loader in (self.train_loader, self.val_loader)]
        if records[0] is None:
            return None
        read = [record() for record in records if record is not None]
        (skipped,) = self.collectives.sum([float(sum(record.get("skipped", 0) for record in read if record))])
        return {**read[0], "skipped": int(skipped)} if read[0] else None

    def _summarise(self, trace: RunTrace, ended_at: float, stopped: bool) -> RunSummary:
        config, clock, first_step = self.config, trace.clock, trace.first_step
        last_record, last_eval = trace.last_record, trace.last_eval
        steps = self.state.step - first_step
        samples = self.state.samples - trace.first_samples
        wall_s = max(ended_at - clock.started_at - clock.paused_s, 1e-9)
        cpu_s_per_wall_s = (time.process_time() - clock.cpu_started_at) / max(time.perf_counter() - clock.started_at, 1e-9)
        steady, steady_wait_fraction = None, float("nan")
        if clock.steady_started_at is not None and self.state.step > clock.steady_first_step:
            steady_wall = ended_at - clock.steady_started_at - clock.steady_paused_s
            steady_samples = self.state.samples - clock.steady_first_samples - clock.steady_excluded_samples
            if steady_samples > 0:
                steady = steady_samples / max(steady_wall - clock.steady_excluded_s, 1e-9)
            steady_wait_fraction = clock.steady_data_wait_s / steady_wall
        wait_fraction = clock.data_wait_s / wall_s
        h2d = sum(clock.h2d_samples) / max(len(clock.h2d_samples), 1)
        wait_sum, steady_wait_sum, h2d_sum = self.collectives.sum([wait_fraction, steady_wait_fraction, h2d])
        (wait_worst,) = self.collectives.max([wait_fraction])
        world = self.context.world_size
        end_to_end = samples / wall_s
        per_device = (steady or end_to_end) / self.layout.devices
        bench = None
        if config.bench_jsonl and self.plan is None:
            bench = bench_samples_per_s(
                config.bench_jsonl, self.workload.name, config.size, config.target, config.batch_size_per_device
            )
        return RunSummary(
            workload=self.workload.name,
            size=config.size,
            target=config.target,
            world_size=self.layout.devices,
            batch_size_per_device=self._step_batch // self.layout.devices,
            global_batch=self._step_batch,
            synthetic_data=config.synthetic_data,
            num_workers=config.num_workers,
            threads=config.threads,
            first_step=first_step,
            last_step=self.state.step,
            samples=samples,
            wall_s=wall_s,
            paused_s=clock.paused_s,
            end_to_end_samples_per_s=end_to_end,
            steady_samples_per_s=steady,
            samples_per_s_per_device=per_device,
            step_time_s=wall_s / max(steps, 1),
            data_wait_fraction=wait_sum / world,
            data_wait_fraction_worst_rank=wait_worst,
            steady_data_wait_fraction=steady_wait_sum / world if steady is not None else None,
            h2d_s_per_step=h2d_sum / world,
            final_loss=last_record.loss if last_record else None,
            validation=last_eval.metrics if last_eval else None,
            bench_samples_per_s=bench,
            io_efficiency=per_device / bench if bench else None,
            stopped_by_signal=stopped,
            torch_version=torch.__version__,
            learning_rates=dataclasses.asdict(self.learning_rates),
            cpu_s_per_wall_s=cpu_s_per_wall_s,
            time_to_target=self._target_record(clock) if self.tracker is not None else None,
            **summary_fields(self.meter.last_quarter(0, self.state.step) if self.meter is not None else None),
            startup_s=trace.startup_s,
            init_from=self.started_from,
            batch_schedule=self._schedule_summary(trace),
            data=self._data_record(),
            diverged_at_step=trace.diverged_at,
            **identify(self.workload).provenance(machine=trace.machine.at_end() if trace.machine else None)
            .fields_of(RunSummary),
        )

    def _schedule_summary(self, trace: RunTrace) -> ScheduleSummary | None:
        if self.plan is None:
            return None
        switches = [SwitchEntry(made.step, made.samples, made.from_global_batch, made.to_global_batch)
                    for made in self.plan.switches if made.step <= self.state.step]
        start = switches[0].from_global_batch if switches else self.plan.global_batch
        return ScheduleSummary(schedule=self.plan.text, start_global_batch=start, final_global_batch=self._step_batch,
                               switches=switches, max_batch_per_device=self.config.batch.max_batch_per_device,
                               compilations=self.target.compile_count() - trace.compiles_at_start)
