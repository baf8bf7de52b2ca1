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
from trainspeed.flags import MAX_BATCH_SIZE, PROCESSES, THREADS, TIMEOUT, machine_cpus, ranged, ranged_as
from trainspeed.train.rows import CONFIG_FILE

LR_SCALING_RULES = ("none", "linear", "sqrt")
MAX_STEPS = 999_999_999
"""A checkpoint's file name holds its step in nine digits (`step-000000060.pt`)."""
RDZV_BACKENDS = ("c10d", "static")


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
class LaunchConfig:
    """Where the ranks run: processes per node and torchrun's rendezvous for several nodes."""

    nproc: int = ranged_as(1, PROCESSES)
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
    data: str | None = None
    synthetic_data: bool = False
    batch_size_per_device: int = ranged(1024, 1, MAX_BATCH_SIZE, why_high=" samples (2^40, a TiB even at a byte each)")
    steps: int | None = ranged(None, 1, MAX_STEPS, why_high=" steps (a checkpoint's name holds its step in 9 digits)")
    epochs: float | None = ranged(None, 0, 1e6, low_open=True)
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
    eval_every: int = 0
    """Steps between validations; 0 = only at the end."""
    eval_batches: int | None = None
    """Cap on validation batches per rank (None = the whole validation split)."""
    log_every: int = 10
    timing_warmup_steps: int = 5
    """Steps left out of the steady-state samples/s (compilation, caches, loader start-up)."""
    bench_jsonl: str | None = None
    """Bench results (JSONL) to compute the IO efficiency against."""
    progress: bool = True
    lr: LRConfig = field(default_factory=LRConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)

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
        """Optimizer steps of the whole run, from --steps or from --epochs and the loader length."""
        if self.steps is not None:
            return self.steps
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
        if (self.steps is None) == (self.epochs is None):
            raise UsageError("train: give exactly one of --steps N or --epochs E")
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
        if self.eval_batches is not None and self.eval_batches < 1:
            raise UsageError(f"train: --eval-batches must be >= 1, got {self.eval_batches}")
        if not 0.0 <= self.lr.min_lr_ratio <= 1.0:
            raise UsageError(f"train: --min-lr-ratio must be in [0, 1], got {self.lr.min_lr_ratio}")
        if self.lr.scaling is not None and self.lr.scaling not in LR_SCALING_RULES:
            raise UsageError(f"train: --lr-scaling {self.lr.scaling!r}: choose one of {', '.join(LR_SCALING_RULES)}")
        if self.launch.rdzv_backend not in RDZV_BACKENDS:
            raise UsageError(
                f"train: --rdzv-backend {self.launch.rdzv_backend!r}: choose one of {', '.join(RDZV_BACKENDS)}"
            )
        if self.launch.nnodes > 1 and not self.launch.rdzv_endpoint:
            raise UsageError("train: --nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
        if not 0 <= self.launch.node_rank < self.launch.nnodes:
            raise UsageError(f"train: --node-rank {self.launch.node_rank} must be in [0, --nnodes)")
        return self


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
