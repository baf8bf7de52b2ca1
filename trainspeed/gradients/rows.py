"""The noise-scale meter's row (`metrics.jsonl`), read by the report and the studies, which import
no torch, so this module imports none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainspeed.rows import Batch


@dataclass(frozen=True)
class NoiseScaleRecord:
    """One `kind: noise-scale` row: a network's gradient noise scale over one logged window.

    |G|^2 and tr(Sigma) come from the squared norms of gradients over a small and a big batch
    (McCandlish et al. 2018, appendix A); `*_avg` are their exponential moving averages (bias
    corrected) and `b_simple_avg` their ratio, the figure to read. `trainspeed.gradients.noise_scale`."""

    KIND: ClassVar[str] = "noise-scale"
    SCHEMA_VERSION: ClassVar[int] = 1

    step: int
    samples: int
    network: str
    method: str
    """How the two batches came about: `ranks` (each rank's batch and the all-reduced one),
    `micro-batches` (k slices of one rank's batch) or `previous-step` (this step's and the last one's)."""
    biased: bool
    """True for `previous-step`: the two gradients are at different weights."""
    small_batch: Batch
    big_batch: Batch
    grad_sq: float
    """|G|^2 over this window's steps."""
    trace_sigma: float
    """tr(Sigma), the per-sample gradient variance, over this window's steps."""
    b_simple: float | None
    """tr(Sigma) / |G|^2 over this window (None where the |G|^2 estimate is not positive)."""
    grad_sq_avg: float
    trace_sigma_avg: float
    b_simple_avg: float | None
    window_steps: int
