"""The typed configuration of one training run, shared by the launcher and every rank.

The launcher validates it once, writes it as JSON into the run directory, and each rank process
(started by torchrun) reads that file back: one source of truth, no re-parsing of flags per rank.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import DEVICES_OR_PROCESSES, MAX_BATCH_SIZE, THREADS, TIMEOUT, machine_cpus, ranged, ranged_as
from trainspeed.gradients.modes import DEFAULT_MEASURE_EVERY, MAX_MEASURE_EVERY
from trainspeed.train.rows import CONFIG_FILE

LR_SCALING_RULES = ("none", "linear", "sqrt")
MAX_STEPS = 999_999_999
"""A checkpoint's file name holds its step in nine digits (`step-000000060.pt`)."""
RDZV_BACKENDS = ("c10d", "static")
AUTO_STEP_TIMES = ("run", "off")
"""`--auto-step-times`: whether auto weighs the step times it measures in the run (`trainspeed.train.batch_schedule`)."""


@dataclass(frozen=True)
class LRConfig:
    """How the learning rate is chosen and scheduled (see `trainspeed.train.lr_schedule`)."""

    base_lr: float | None = ranged(None, 0, 1e6, low_open=True)
    """Peak LR at the reference global batch; None keeps the workload optimizer's own LR."""
    scaling: str | None = None
    """How the peak LR follows the global batch: none, linear (Goyal et al.) or sqrt (common for Adam).
    None: sqrt, or none where there is no reference batch (see `resolve_lr`)."""
    reference_batch: int | None = None
    """Global batch at which the LR was tuned; None: the workload's `reference_batch` (512 where it
    declares none; a workload that declares None has its LR used as set, at every batch)."""
    warmup_steps: int | None = None
    """Linear warm-up length; None = 5% of the run."""
    min_lr_ratio: float = ranged(0.1, 0, 1)
    """The cosine decays to this fraction of the peak LR at the last step."""


@dataclass(frozen=True)
class BatchScheduleConfig:
    """A global batch that changes as the run trains (`trainspeed.train.batch_schedule`)."""

    schedule: str | None = None
    """`64@0,128@20000` (global batch @ samples trained), `auto` (doubled while the noise scale says
    the next batch still scales), or None: the fixed --batch-size-per-device."""
    global_batch_min: int | None = ranged(None, 1, MAX_BATCH_SIZE)
    """auto: the global batch it starts at."""
    global_batch_max: int | None = ranged(None, 1, MAX_BATCH_SIZE)
    """auto: the largest global batch it doubles to."""
    critical_batch: str | None = None
    """auto: critical-batch rows (a study's folder or a JSONL file) that calibrate B_crit = c x B_simple."""
    auto_step_times: str = "run"
    """auto: `run` also weighs the step times measured in the run; `off` decides by the noise scale
    (and --bench-jsonl's step times) alone, so every run of it switches at the same steps."""
    max_batch_per_device: int | None = ranged(None, 1, MAX_BATCH_SIZE)
    """The most samples one device holds in one forward and backward: a schedule steps past it in
    micro-batches of at most this many (auto stops below it). The launcher writes the smaller of
    this and what --bench-jsonl's out-of-memory rows allow."""


@dataclass(frozen=True)
class LaunchConfig:
    """Where the ranks run: processes per node and torchrun's rendezvous for several nodes."""

    nproc: int = ranged_as(1, DEVICES_OR_PROCESSES)
    """Processes per node, one per device; a target that drives every local device from one process
    (data_parallel "spmd": xla:*, jax:*) takes it as the devices that process drives."""
    nnodes: int = 1
    node_rank: int = 0
    rdzv_backend: str = "c10d"
    rdzv_endpoint: str | None = None
    rdzv_id: str = "trainspeed"
    collective_timeout_s: float = ranged_as(300.0, TIMEOUT)
    """A collective that waits longer than this raises instead of hanging (a peer died)."""


@dataclass(frozen=True)
class TrainConfig:
    workload: str = "mahjong"
    size: str | None = None
    """None: the workload's default size (`trainspeed.workloads.resolve_size`); the launcher
    writes the size it resolved into the run's train_config.json."""
    target: str = "cpu:eager:fp32"
    exported: str | None = None
    """The folder of steps `trainspeed export` wrote, trained where only JAX is
    (`trainspeed.exported.train`); None: the workload trained on --target. A run folder's settings
    say by it which trainer wrote the run (`trainspeed.train.run_trainer`)."""
    data: str | None = None
    synthetic_data: bool = False
    bad_samples: str = "refuse"
    """A sample of --data that cannot be read (a corrupt image): refuse (one line, the run stops) or
    skip (counted in the summary, warned about; the next readable sample takes its place)."""
    batch_size_per_device: int = ranged(1024, 1, MAX_BATCH_SIZE, why_high=" samples (2^40, a TiB even at a byte each)")
    steps: int | None = ranged(None, 1, MAX_STEPS, why_high=" steps (a checkpoint's name holds its step in 9 digits)")
    epochs: float | None = ranged(None, 0, 1e6, low_open=True)
    samples: int | None = ranged(None, 1, 2**62)
    """The budget in samples trained: the run ends at the first step at or past it."""
    seed: int = 0
    num_workers: int = ranged(1, 0, machine_cpus, why_high=" loader processes per rank, more than this machine's CPUs")
    """Loader worker processes per rank."""
    threads: int | None = ranged_as(1, THREADS)
    """torch intra-op threads per rank (None leaves torch's default)."""
    out_dir: str = "runs/train"
    checkpoint_every: int = 0
    """Steps between checkpoints; 0 = only at the end and on SIGTERM."""
    keep_checkpoints: int = 2
    """The newest checkpoints kept; 0 keeps every one (to evaluate a policy as it learnt)."""
    resume: bool = False
    init_from: str | None = None
    """Start from a checkpoint of another run (`trainspeed.train.init_from`): its networks and optimizer
    states only; RUN_DIR with `init_step`, or the file RUN_DIR/checkpoints/step-NNNNNNNNN.pt."""
    init_step: int | None = ranged(None, 0, MAX_STEPS, why_high=" steps (a checkpoint's name holds its step in 9 digits)")
    """The step of the checkpoint of --init-from RUN_DIR (None where --init-from names the file)."""
    eval_every: int = 0
    """Steps between validations; 0 = only at the end."""
    eval_every_samples: int = 0
    """Samples between validations (a validation after the first step that passes each multiple), so
    runs at different batches are validated at the same samples; 0 = --eval-every decides."""
    eval_batches: int | None = None
    """Cap on validation batches per rank (None = the whole validation split)."""
    until: str | None = None
    """A quality goal, `val/METRIC>=X` or `val/METRIC<=X`: the run records when validation first meets
    it (`trainspeed.train.time_to_target`)."""
    stop_at_target: bool = False
    """Stop (with a checkpoint) at the first validation that meets --until."""
    noise_scale: str = "on"
    """Measure the gradient noise scale B_simple (`trainspeed.gradients.noise_scale`): on or off."""
    noise_scale_micro_batches: int = ranged(1, 1, 4096)
    """On one rank, k > 1 runs each step's backward over k slices of the batch to measure it unbiased."""
    noise_scale_every: int = ranged(DEFAULT_MEASURE_EVERY, 1, MAX_MEASURE_EVERY)
    """On one rank, measure one step in K (`trainspeed.gradients.noise_scale`): a measured step costs
    its micro-batches' passes (or a copy of the gradient), the others train plainly; 1: every step.
    The default's cost: `docs/results/noise_scale_cost.md`."""
    noise_scale_smoothing: float = 0.99
    """Weight of the old value in the moving averages of |G|^2 and tr(Sigma)."""
    log_every: int = 10
    timing_warmup_steps: int = 5
    """Steps left out of the steady-state samples/s (compilation, caches, loader start-up)."""
    bench_jsonl: str | None = None
    """Bench results (JSONL) to compute the IO efficiency against."""
    progress: bool = True
    lr: LRConfig = field(default_factory=LRConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    batch: BatchScheduleConfig = field(default_factory=BatchScheduleConfig)

    # --- derived ----------------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.launch.nproc * self.launch.nnodes

    @property
    def global_batch(self) -> int:
        return self.batch_size_per_device * self.world_size

    @property
    def run_dir(self) -> Path:
        return Path(self.out_dir)

    def total_steps(self, batches_per_epoch: int | None) -> int:
        """Optimizer steps of the whole run at the fixed batch, from --steps, --samples, or --epochs
        and the loader length (a batch schedule's are `trainspeed.train.batch_schedule.run_length`'s)."""
        if self.steps is not None:
            return self.steps
        if self.samples is not None:
            return math.ceil(self.samples / self.global_batch)
        assert self.epochs is not None and batches_per_epoch is not None
        return max(1, math.ceil(self.epochs * batches_per_epoch))

    # --- serialisation -------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = CONFIG_FILE) -> "TrainConfig":
        """The settings `to_json` wrote, every field of its type; UsageError naming `where` for
        text that is not JSON, nests too deeply, or holds unknown or mistyped settings."""
        import dacite

        from trainspeed.user_json import parse_json

        raw = parse_json(text, where)
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: not the settings of a training run (a JSON {type(raw).__name__})")
        typed = dacite.Config(strict=True, check_types=True, type_hooks={float: _int_as_float})
        try:
            return dacite.from_dict(cls, raw, config=typed)
        except (dacite.DaciteError, TypeError, ValueError) as error:
            raise UsageError(f"{where}: not the settings of a training run ({str(error)[:120]})") from None

    # --- validation ----------------------------------------------------------------------------
    def validate(self) -> "TrainConfig":
        """Raise UsageError naming the flag and the fix; return self so calls can chain."""
        if (self.data is None) == (not self.synthetic_data):
            raise UsageError("train: give exactly one of --data DIR or --synthetic-data")
        if self.data is not None and not Path(self.data).exists():
            raise UsageError(f"train: --data {self.data}: no such file or directory")
        if self.keep_checkpoints < 0:
            raise UsageError(f"train: --keep-checkpoints {self.keep_checkpoints}: give 0 (keep all) or more")
        if [self.steps, self.epochs, self.samples].count(None) != 2:
            raise UsageError("train: give exactly one of --steps N or --epochs E (or --samples N)")
        if self.synthetic_data and self.epochs is not None:
            raise UsageError("train: --synthetic-data has no epochs; use --steps N")
        _require_positive("--steps", self.steps)
        _require_positive("--epochs", self.epochs)
        _require_positive("--batch-size-per-device", self.batch_size_per_device)
        _require_positive("--nproc", self.launch.nproc)
        _require_positive("--nnodes", self.launch.nnodes)
        _require_positive("--log-every", self.log_every)
        _require_positive("--threads", self.threads)
        _require_positive("--collective-timeout-s", self.launch.collective_timeout_s)
        _require_positive("--lr-reference-batch", self.lr.reference_batch)
        _require_positive("--lr", self.lr.base_lr)
        for flag, value in (
            ("--num-workers", self.num_workers),
            ("--checkpoint-every", self.checkpoint_every),
            ("--eval-every", self.eval_every),
            ("--timing-warmup-steps", self.timing_warmup_steps),
            ("--warmup-steps", self.lr.warmup_steps),
        ):
            if value is not None and value < 0:
                raise UsageError(f"train: {flag} must be >= 0, got {value}")
        if self.eval_every_samples < 0:
            raise UsageError(f"train: --eval-every-samples must be >= 0, got {self.eval_every_samples}")
        if self.eval_every and self.eval_every_samples:
            raise UsageError("train: give one of --eval-every STEPS or --eval-every-samples SAMPLES, not both")
        if self.init_step is not None and self.init_from is None:
            raise UsageError("train: --init-step is the step of --init-from RUN_DIR's checkpoint; give --init-from too")
        self._validate_goal()
        self._validate_noise_scale()
        if self.eval_batches is not None and self.eval_batches < 1:
            raise UsageError(f"train: --eval-batches must be >= 1, got {self.eval_batches}")
        if not 0.0 <= self.lr.min_lr_ratio <= 1.0:
            raise UsageError(f"train: --min-lr-ratio must be in [0, 1], got {self.lr.min_lr_ratio}")
        if self.lr.scaling is not None and self.lr.scaling not in LR_SCALING_RULES:
            raise UsageError(f"train: --lr-scaling {self.lr.scaling!r}: choose one of {', '.join(LR_SCALING_RULES)}")
        if self.batch.auto_step_times not in AUTO_STEP_TIMES:
            raise UsageError(f"train: --auto-step-times {self.batch.auto_step_times!r}: choose one of "
                             f"{', '.join(AUTO_STEP_TIMES)}")
        if self.launch.rdzv_backend not in RDZV_BACKENDS:
            raise UsageError(
                f"train: --rdzv-backend {self.launch.rdzv_backend!r}: choose one of {', '.join(RDZV_BACKENDS)}"
            )
        if self.launch.nnodes > 1 and not self.launch.rdzv_endpoint:
            raise UsageError("train: --nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
        if not 0 <= self.launch.node_rank < self.launch.nnodes:
            raise UsageError(f"train: --node-rank {self.launch.node_rank} must be in [0, --nnodes)")
        return self


    def _validate_goal(self) -> None:
        from trainspeed.train.time_to_target import parse_goal

        if self.until is not None:
            parse_goal(self.until)
            if self.synthetic_data:
                raise UsageError("train: --until needs validation, and --synthetic-data has none; give --data DIR")
        elif self.stop_at_target:
            raise UsageError("train: --stop-at-target stops at the goal --until names; give --until too")

    def _validate_noise_scale(self) -> None:
        from trainspeed.gradients.modes import NOISE_SCALE_MODES

        if self.noise_scale not in NOISE_SCALE_MODES:
            raise UsageError(f"train: --noise-scale {self.noise_scale!r}: choose one of {', '.join(NOISE_SCALE_MODES)}")
        micro = self.noise_scale_micro_batches
        if micro < 1:
            raise UsageError(f"train: --noise-scale-micro-batches must be >= 1, got {micro}")
        if micro > 1 and self.noise_scale == "off":
            raise UsageError("train: --noise-scale-micro-batches splits the step to measure the noise scale, which "
                             "--noise-scale off does not measure; drop one of the two")
        if micro > 1 and self.world_size > 1:
            raise UsageError(f"train: --noise-scale-micro-batches is for one rank ({self.world_size} ranks measure "
                             "the noise scale from each rank's gradient); drop it")
        if micro > 1 and self.batch.schedule is None and self.batch_size_per_device % micro:
            raise UsageError(f"train: --noise-scale-micro-batches {micro} must divide --batch-size-per-device "
                             f"{self.batch_size_per_device}")
        if not 0.0 <= self.noise_scale_smoothing < 1.0:
            raise UsageError(f"train: --noise-scale-smoothing must be in [0, 1), got {self.noise_scale_smoothing}")

    def is_eval_due(self, step: int, samples_before: int, samples_after: int) -> bool:
        """A validation after `step`, which trained from `samples_before` to `samples_after` (not
        the last: the run validates at its end anyway)?"""
        if self.eval_every_samples:
            return samples_after // self.eval_every_samples > samples_before // self.eval_every_samples
        return self.eval_every > 0 and step % self.eval_every == 0


def resolve_lr(lr: LRConfig, workload_reference_batch: int | None) -> LRConfig:
    """The LR rule a run uses, with nothing left to a default: the flags where given, else what the
    workload declares. Without a reference batch there is nothing to scale from, so the rule is
    `none`; asking for a scaling rule then is a UsageError rather than a rule silently ignored."""
    reference = lr.reference_batch if lr.reference_batch is not None else workload_reference_batch
    scaling = lr.scaling if lr.scaling is not None else ("sqrt" if reference is not None else "none")
    if scaling != "none" and reference is None:
        raise UsageError(f"train: --lr-scaling {scaling} needs the batch the LR was tuned at, and the workload "
                         "declares none (reference_batch = None): give --lr-reference-batch N, or drop --lr-scaling")
    return dataclasses.replace(lr, scaling=scaling, reference_batch=reference)


def _int_as_float(value: object) -> object:
    """JSON may write 3.0 as 3: a whole number is a valid float setting (a bool is not)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _require_positive(flag: str, value: float | None) -> None:
    """NaN compares false with everything, so `value <= 0` alone lets --lr nan through (and inf)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"train: {flag} must be a finite number > 0, got {value}")
