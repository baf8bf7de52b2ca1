"""Learning rate: scaling with the global batch, linear warm-up, cosine decay.

Data parallelism multiplies the global batch by the number of devices; a larger batch averages
more gradients, so its steps can be larger. The peak LR is the base LR (tuned at a reference
global batch) times a scaling factor k = global_batch / reference_batch:

    none    peak = base                 (keep the LR; fewer, equally sized steps)
    linear  peak = base * k             (Goyal et al. 2017, for SGD; with warm-up)
    sqrt    peak = base * sqrt(k)       (keeps the update's noise scale; the usual choice for Adam)

The batch the LR was tuned at is the workload's to declare (`reference_batch`; 512 where it
declares none, and a workload that declares None has its LR used as set); the flags override it.
A run prints the peak LR it derived, and how, before its first step, and records it in its summary.

Warm-up ramps linearly from peak/warmup to peak over the first `warmup_steps` optimizer steps
(large batches with a large LR diverge without it); a cosine then decays to
`min_lr_ratio * peak` at the last step. Every optimizer of the workload (StyleGAN3 has two)
follows the same multiplier, each from its own base LR.

With a batch schedule (`trainspeed.train.batch_schedule`) warm-up and cosine run over samples
trained instead of steps (`samples_multiplier`: a step's LR is the ramp at the samples it has trained
at its end, the cosine at those before it), so a switch changes neither; the peak follows the batch
of each step by the same scaling rule. `--warmup-steps N` is then N steps of the starting batch, and
the default 5% of the run's samples in such steps. A schedule that never switches trains with the
LRs of the fixed batch.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR

from trainspeed.train.config import LRConfig
from trainspeed.train.lr_rule import (  # noqa: F401 - the rule's names, where the schedulers are
    LearningRates,
    default_warmup_steps,
    lr_multiplier,
    lr_scale_factor,
    warmup_steps,
)


def first_group_lrs(optimizers: dict[str, torch.optim.Optimizer]) -> dict[str, float]:
    """Each optimizer's LR as its first param group holds it (the workload's own, before scheduling)."""
    return {name: float(optimizer.param_groups[0]["lr"]) for name, optimizer in optimizers.items()}


def build_schedulers(
    optimizers: dict[str, torch.optim.Optimizer], config: LRConfig, global_batch: int, total_steps: int
) -> dict[str, LambdaLR]:
    """Set every param group's peak LR and attach one warm-up + cosine scheduler per optimizer.

    Call once, before loading a checkpoint: the optimizer and scheduler states loaded afterwards
    restore the exact LR of the step the run stopped at.
    """
    scale = lr_scale_factor(config.scaling, global_batch, config.reference_batch)
    warmup = warmup_steps(config, total_steps)
    schedulers = {}
    for name, optimizer in optimizers.items():
        for group in optimizer.param_groups:
            base = config.base_lr if config.base_lr is not None else group["lr"]
            group["lr"] = base * scale
            group["initial_lr"] = group["lr"]

        def multiplier(step: int) -> float:
            return lr_multiplier(step, total_steps, warmup, config.min_lr_ratio)

        schedulers[name] = LambdaLR(optimizer, multiplier)
    return schedulers


def warmup_samples(config: LRConfig, total_samples: int, start_batch: int) -> int:
    """A schedule's warm-up in samples: --warmup-steps steps of the starting batch, by default 5% of
    the run's samples in such steps (the fixed batch's warm-up where the batch never switches)."""
    steps = warmup_steps(config, max(1, round(total_samples / start_batch)))
    return steps * start_batch


def samples_multiplier(samples: int, batch: int, total_samples: int, warmup: int, min_lr_ratio: float,
                       start_batch: int) -> float:
    """Fraction of the peak LR of a step of `batch` samples after `samples` samples: the warm-up at
    the samples the step has trained at its end, the cosine at those before it, over the samples
    after the warm-up less one step of the starting batch (`lr_multiplier` where every step has the
    starting batch; a switch moves neither)."""
    if samples < warmup:
        return min(1.0, (samples + batch) / warmup)
    decay = max(start_batch, total_samples - warmup - start_batch)
    progress = min(1.0, (samples - warmup) / decay)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * cosine


ScheduleProgress = Callable[[], tuple[int, int]]
"""(samples trained, global batch of the next step) of a run with a batch schedule."""


def build_sample_schedulers(
    optimizers: dict[str, torch.optim.Optimizer], config: LRConfig, start_batch: int, total_samples: int,
    progress: ScheduleProgress,
) -> dict[str, LambdaLR]:
    """`build_schedulers` for a batch schedule: every param group's peak LR at `start_batch`, and a
    scheduler whose multiplier reads the run's `progress` when it steps: warm-up and cosine over
    samples, times the scaling rule's factor of the next step's batch over the starting one's.
    After a switch, `refresh_lrs` puts the LR of the new batch in place at once."""
    start_scale = lr_scale_factor(config.scaling, start_batch, config.reference_batch)
    warmup = warmup_samples(config, total_samples, start_batch)
    schedulers = {}
    for name, optimizer in optimizers.items():
        for group in optimizer.param_groups:
            base = config.base_lr if config.base_lr is not None else group["lr"]
            group["lr"] = base * start_scale
            group["initial_lr"] = group["lr"]

        def multiplier(step: int) -> float:
            samples, batch = progress()
            scale = lr_scale_factor(config.scaling, batch, config.reference_batch) / start_scale
            return samples_multiplier(samples, batch, total_samples, warmup, config.min_lr_ratio, start_batch) * scale

        schedulers[name] = LambdaLR(optimizer, multiplier)
    return schedulers


def refresh_lrs(schedulers: dict[str, LambdaLR]) -> None:
    """Set every param group's LR to what its scheduler's multiplier says now, without stepping it
    (a batch switch: the step count stays, the batch the multiplier reads changed)."""
    for scheduler in schedulers.values():
        values = [base * scheduler.lr_lambdas[index](scheduler.last_epoch)
                  for index, base in enumerate(scheduler.base_lrs)]
        for group, value in zip(scheduler.optimizer.param_groups, values):
            group["lr"] = value
        scheduler._last_lr = values


def current_lr(optimizers: dict[str, torch.optim.Optimizer]) -> float:
    """The LR of the first param group of the first optimizer (for logs)."""
    first = next(iter(optimizers.values()))
    return float(first.param_groups[0]["lr"])
