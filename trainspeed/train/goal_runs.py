"""Runs to a quality goal at any global batch, by one recipe: the time-to-target study trains every
run by it, and `trainspeed plan --check` repeats it with another target and device count (the
steps to a goal depend on the batch and the recipe, not on the device).

The recipe is what the study's settings row records (`GoalSettings`) with the size, base learning
rate and reference batch it resolved; `GoalRecipe.run_config` makes one run's TrainConfig of it,
which `trainspeed.train.flags.train_command` turns into the command that runs it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainspeed.train.config import LaunchConfig, LRConfig, TrainConfig

LOG_WINDOWS_MAX_STEPS = 50
"""A run to a goal logs a window per validation, or every 50 steps where validations are further apart."""


class GoalSettings(Protocol):
    """The settings runs to a goal are made from, as the time-to-target study records them."""

    workload: str
    data: str
    until: str
    target: str
    nproc: int
    threads: int
    num_workers: int
    max_samples: int
    """Each run's budget in samples."""
    eval_every_samples: int
    val_samples: int | None
    """Validation samples per pass (None: the whole split)."""
    warmup_samples: int
    noise_scale_micro_batches: int


@dataclass(frozen=True)
class GoalRecipe:
    """How every run to the goal trains, whatever its batch: the same samples of warm-up, then a
    constant LR (so the steps to the goal do not depend on the budget), scaled from the reference
    batch by the square root; a validation every so many samples, on as many samples at every
    batch; stopped at the goal, with no checkpoint before the last."""

    base: TrainConfig
    """What every run shares: workload, size, data, target, devices, threads, the goal."""
    base_lr: float
    """Peak LR at the reference batch; a run at batch B and factor f trains at base_lr x f x sqrt(B / reference)."""
    reference_batch: int
    max_samples: int
    warmup_samples: int
    val_samples: int | None
    noise_scale_micro_batches: int
    """Slices of a one-rank step its unbiased noise scale comes from (runs of several ranks use the previous step).
    Every step is measured (`--noise-scale-every 1`): these runs are measurements, whose noise scale
    near the goal the study and the plan read, not runs that only train."""

    @classmethod
    def from_settings(cls, settings: GoalSettings, size: str, base_lr: float, reference_batch: int) -> "GoalRecipe":
        """The recipe of the study's settings, at the size, base LR and reference batch it resolved."""
        base = TrainConfig(
            workload=settings.workload, size=size, data=settings.data, target=settings.target,
            threads=settings.threads, num_workers=settings.num_workers, launch=LaunchConfig(nproc=settings.nproc),
            lr=LRConfig(scaling="none", min_lr_ratio=1.0), until=settings.until, stop_at_target=True,
            eval_every_samples=settings.eval_every_samples, checkpoint_every=0, progress=False)
        return cls(base=base, base_lr=base_lr, reference_batch=reference_batch, max_samples=settings.max_samples,
                   warmup_samples=settings.warmup_samples, val_samples=settings.val_samples,
                   noise_scale_micro_batches=settings.noise_scale_micro_batches)

    def peak_lr(self, batch: int, factor: float) -> float:
        return self.base_lr * factor * math.sqrt(batch / self.reference_batch)

    def run_config(self, batch: int, lr_factor: float, seed: int, out: Path, *, target: str | None = None,
                   nproc: int | None = None, noise_scale_micro_batches: int | None = None) -> TrainConfig:
        """One run at global `batch`: its LR factor and seed, in `out`; `target` and `nproc` replace
        the recipe's (the plan's checks run the recipe on the configuration they check)."""
        nproc = nproc or self.base.launch.nproc
        micro = noise_scale_micro_batches or self.noise_scale_micro_batches
        return dataclasses.replace(
            self.base, target=target or self.base.target, launch=dataclasses.replace(self.base.launch, nproc=nproc),
            batch_size_per_device=batch // nproc, steps=self.max_samples // batch, seed=seed,
            lr=dataclasses.replace(self.base.lr, base_lr=float(f"{self.peak_lr(batch, lr_factor):.6g}"),
                                   warmup_steps=max(1, round(self.warmup_samples / batch))),
            log_every=max(1, min(LOG_WINDOWS_MAX_STEPS, self.base.eval_every_samples // batch)),
            eval_batches=None if self.val_samples is None else max(1, self.val_samples // batch),
            noise_scale_micro_batches=micro if nproc == 1 else 1, noise_scale_every=1, out_dir=str(out))
