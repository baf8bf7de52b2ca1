"""Steps to a target against the global batch: S(B) = S_min (1 + B_crit / B), fitted, with bootstrap.

McCandlish et al. (2018) derive that training to a given loss trades steps S for samples E = B S
along (S / S_min - 1)(E / E_min - 1) = 1, which is S(B) = S_min + E_min / B with the critical batch
B_crit = E_min / S_min: below it a doubled batch nearly halves the steps (perfect scaling), above it
the steps barely fall. The model is linear in (S_min, E_min) against 1/B, so it is fitted by least
squares on relative errors (steps to target span decades, and their spread over seeds grows with
them), and the interval of every parameter comes from refitting on the seeds resampled within each
batch. Torch-free: the plan and the report read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

BOOTSTRAP_DRAWS = 2000
KEPT_DRAWS = 400
"""Draws a fit row keeps, for the plan's intervals on predicted steps at other batches."""


@dataclass(frozen=True)
class StepsFit:
    """S(B) = s_min + e_min / B. `b_crit` is inf where the steps fell as fast as perfect scaling at
    every batch measured (s_min 0), 0 where they did not fall at all (e_min 0)."""

    s_min: float
    e_min: float

    @property
    def b_crit(self) -> float:
        if self.s_min <= 0:
            return math.inf
        return self.e_min / self.s_min

    def steps(self, batch: float) -> float:
        return self.s_min + self.e_min / batch

    def samples(self, batch: float) -> float:
        return batch * self.steps(batch)

    def statistical_efficiency(self, batch: float) -> float:
        """E_min / E(B) = 1 / (1 + B / B_crit): the share of samples at batch B that a batch far
        below B_crit would not have needed (Pollux's statistical efficiency, from this fit)."""
        samples = self.samples(batch)
        return self.e_min / samples if samples > 0 else math.nan


def fit_steps(batches: Sequence[float], steps: Sequence[float], iterations: int = 8) -> StepsFit:
    """The least-squares fit of relative errors, each parameter kept non-negative: where the free
    fit makes one negative, the model without it is fitted instead (S = E_min / B or S = S_min)."""
    batch = np.asarray(batches, dtype=float)
    measured = np.asarray(steps, dtype=float)
    if len(batch) < 2 or np.any(measured <= 0) or np.any(batch <= 0):
        raise ValueError("a fit needs positive steps at two or more batches")
    design = np.stack([np.ones_like(batch), 1.0 / batch], axis=1)
    predicted = measured.copy()
    s_min = e_min = 0.0
    for _ in range(iterations):
        weights = 1.0 / predicted
        s_min, e_min = np.linalg.lstsq(design * weights[:, None], measured * weights, rcond=None)[0]
        if s_min < 0 or e_min < 0:
            break
        predicted = np.maximum(design @ np.array([s_min, e_min]), 1e-12)
    tiny = 1e-9 * float(measured.max())
    if s_min < tiny or e_min < tiny * float(batch.min()):
        return _one_term_fit(batch, measured, perfect_scaling=s_min < tiny)
    return StepsFit(s_min=float(s_min), e_min=float(e_min))


def _one_term_fit(batch: np.ndarray, measured: np.ndarray, perfect_scaling: bool) -> StepsFit:
    """The best single-parameter model on relative errors: the geometric mean of the one ratio."""
    if perfect_scaling:
        return StepsFit(s_min=0.0, e_min=float(np.exp(np.mean(np.log(measured * batch)))))
    return StepsFit(s_min=float(np.exp(np.mean(np.log(measured)))), e_min=0.0)


@dataclass(frozen=True)
class BootstrapFit:
    """The fit on every seed's steps, and the same fit on seeds resampled within each batch."""

    fit: StepsFit
    draws: list[StepsFit]

    def interval(self, value: str, level: float = 0.95) -> list[float]:
        values = np.array([getattr(draw, value) for draw in self.draws], dtype=float)
        tail = (1 - level) / 2 * 100
        return [float(np.percentile(values, tail, method="nearest")),
                float(np.percentile(values, 100 - tail, method="nearest"))]

    def steps_interval(self, batch: float, level: float = 0.95) -> list[float]:
        values = np.array([draw.steps(batch) for draw in self.draws])
        tail = (1 - level) / 2 * 100
        return [float(np.percentile(values, tail, method="nearest")),
                float(np.percentile(values, 100 - tail, method="nearest"))]


def bootstrap_fit(steps_per_batch: dict[int, Sequence[float]], draws: int = BOOTSTRAP_DRAWS,
                  seed: int = 0) -> BootstrapFit:
    """The fit on each batch's mean steps over its seeds, and `draws` refits on the seeds of each
    batch drawn with replacement (the batches stay: they are the design, not a sample)."""
    batches = sorted(steps_per_batch)
    means = [float(np.mean(steps_per_batch[batch])) for batch in batches]
    fit = fit_steps(batches, means)
    generator = np.random.default_rng(seed)
    refits = []
    for _ in range(draws):
        drawn = [float(np.mean(generator.choice(np.asarray(steps_per_batch[batch], dtype=float),
                                                len(steps_per_batch[batch])))) for batch in batches]
        refits.append(fit_steps(batches, drawn))
    return BootstrapFit(fit=fit, draws=refits)

