"""The learning-rate rule as plain arithmetic: the peak LR's scaling with the global batch, the
warm-up and the cosine (`trainspeed.train.lr_schedule` says why, and attaches it to torch's
optimizers). It imports no torch, so a trainer of exported steps, where only JAX is, follows the
same rule step for step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainspeed.train.config import LRConfig


def lr_scale_factor(rule: str, global_batch: int, reference_batch: int | None) -> float:
    """How much larger the peak LR is at `global_batch` than at `reference_batch`."""
    if rule == "none":
        return 1.0
    if reference_batch is None:
        raise ValueError(f"LR scaling rule {rule!r} needs a reference batch")
    ratio = global_batch / reference_batch
    if rule == "linear":
        return ratio
    if rule == "sqrt":
        return math.sqrt(ratio)
    raise ValueError(f"unknown LR scaling rule {rule!r}")


def default_warmup_steps(total_steps: int) -> int:
    return max(1, round(0.05 * total_steps))


def warmup_steps(config: LRConfig, total_steps: int) -> int:
    return config.warmup_steps if config.warmup_steps is not None else default_warmup_steps(total_steps)


@dataclass(frozen=True)
class LearningRates:
    """Each optimizer's peak LR and how the run derived it from the LR it was given, so a scaled LR
    is never a surprise: printed before the first step and recorded in summary.json."""

    given: dict[str, float]
    """Per optimizer: --lr, or the workload's own LR (first param group)."""
    given_by: str
    """"--lr" or "workload"."""
    scaling: str
    reference_batch: int | None
    global_batch: int
    scale: float
    peak: dict[str, float]
    """given x scale: what warm-up ramps to and the cosine decays from."""
    warmup_steps: int
    min_lr_ratio: float
    warmup_samples: int | None = None
    """With a batch schedule: the warm-up in samples (`warmup_steps` of the starting batch)."""

    @staticmethod
    def derive(workload_lrs: dict[str, float], config: LRConfig, global_batch: int, total_steps: int) -> "LearningRates":
        scale = lr_scale_factor(config.scaling, global_batch, config.reference_batch)
        given = {name: config.base_lr if config.base_lr is not None else lr for name, lr in workload_lrs.items()}
        return LearningRates(
            given=given, given_by="--lr" if config.base_lr is not None else "workload", scaling=config.scaling,
            reference_batch=config.reference_batch, global_batch=global_batch, scale=scale,
            peak={name: lr * scale for name, lr in given.items()}, warmup_steps=warmup_steps(config, total_steps),
            min_lr_ratio=config.min_lr_ratio)

    def line(self) -> str:
        """One line: each peak LR, what it came from, and the flag that would keep it as given."""
        peaks = ", ".join(f"{name} {lr:.3g}" for name, lr in self.peak.items())
        given = ", ".join(f"{lr:.3g}" for lr in self.given.values())
        source = "--lr" if self.given_by == "--lr" else "the workload's"
        if self.scaling == "none":
            why = "the workload declares no reference batch" if self.reference_batch is None else "--lr-scaling none"
            how = f"= {given} ({source}), not scaled ({why})"
        else:
            how = (f"= {given} ({source}) x {self.scale:.4g} ({self.scaling} of global batch {self.global_batch} / "
                   f"reference batch {self.reference_batch}; --lr-scaling none keeps it as given)")
        warmup = (f"{self.warmup_steps} steps" if self.warmup_samples is None else
                  f"{self.warmup_samples:,} samples; the peak follows each step's global batch by the rule")
        return f"train: peak learning rate {peaks} {how}; warm-up {warmup}, cosine to {self.min_lr_ratio:g}x"


def lr_multiplier(step: int, total_steps: int, warmup_steps: int, min_lr_ratio: float) -> float:
    """Fraction of the peak LR used by optimizer step `step` (0-based)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps - 1)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * cosine
