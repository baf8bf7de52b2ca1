"""A workload's declared FLOPs per sample, checked against torch's FLOP counter on one real step.

MFU rests on `flops_per_sample`, which the workload writes itself (a formula, or its own count);
nothing else checks it. The bench therefore runs training steps (forward, backward, update) of a
fresh build of the workload under torch's FLOP formulas and records both numbers in every row.

How it counts: `trainspeed.workloads.flops.FlopSum`, the per-op formulas of
`torch.utils.flop_counter.FlopCounterMode` summed over every op dispatched (FlopCounterMode's own
module tracking refuses the double backward of a gradient penalty), with ours for the ops torch
has none for (`trainspeed.workloads.flop_formulas`: a mixture-of-experts layer's grouped matmul). The counted step is the
second of the build: the first may do one-off work (StyleGAN3 adds its R1 penalty at step 0 and
then every 16th step), and MFU is of the steps after the first. The steps run on the meta device
(shapes only: no memory, no arithmetic, so a large model costs nothing), or on the host CPU where
the step cannot run on meta (it reads a value, or a shape depends on the data).

What the formulas see: matmuls and convolutions (and their backward), by their shapes, and
grouped matmuls (`torch._grouped_mm`) by their groups; not elementwise ops, normalisations or
optimizer updates, which MFU conventions leave out too. They
see no FLOPs in fused attention kernels they have no formula for, such as the CPU flash-attention
kernel that `scaled_dot_product_attention` picks on the host: the steps run under the math SDPA
backend, whose matmuls are counted (all of them: a causal mask's masked half too, as a flash
kernel without block skipping computes it). Work done outside torch ops (a Triton kernel) is
invisible, and multiplications by the zeros of a padded or banded matmul are counted; a workload's
declared count may rightly differ for those reasons.

MFU keeps using the declared number (the workload may know what the counter cannot see); a
difference of more than `TOLERANCE` is one warning line.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.workloads.base import Workload
from trainspeed.workloads.flops import FlopCountError, count_flops_per_sample

TOLERANCE = 0.05
"""Relative difference between declared and counted FLOPs beyond which the bench warns."""
MFU_USES = "declared"
"""Which count MFU is computed from (recorded in every row as `mfu_flops_source`): the workload's
own number, which a workload built from a library (`timm:resnet50`) obtains by counting; its rows
say "counted"."""


@dataclass(frozen=True)
class FlopsCheck:
    workload: str
    size: str
    declared: float
    """`workload.flops_per_sample(size)`."""
    counted: float | None
    """torch's formulas over one training step, per sample; None when the step failed."""
    counted_on: str | None = None
    """The device the counted step ran on: "meta", or "cpu" where it cannot run on meta."""
    count_error: str | None = None
    """Why there is no count (the step raised on the host too)."""
    declared_is_counted: bool = False
    """The workload's own number is this same count (`flops_counted`), not a formula of its own."""

    @property
    def relative_difference(self) -> float | None:
        """(declared - counted) / counted; None without a count or when nothing was counted."""
        if not self.counted:
            return None
        return (self.declared - self.counted) / self.counted

    def warning(self) -> str | None:
        """One line when the two disagree by more than TOLERANCE (or no count could be made)."""
        what = f"{self.workload} {self.size}: flops_per_sample declares {self.declared:.4g}"
        if self.counted is None:
            return f"{what}; no training step could be counted ({self.count_error}); MFU uses the declared count"
        difference = self.relative_difference
        if difference is not None and abs(difference) <= TOLERANCE:
            return None
        off = "nothing" if difference is None else f"{self.counted:.4g}, declared {difference:+.1%}"
        return (f"{what}, torch's FlopCounterMode formulas count {off} on a training step ({self.counted_on}, "
                f"math attention); MFU uses the declared count (rows: flops_per_sample_declared, "
                f"flops_per_sample_counted, mfu_flops_source; trainspeed/bench/flops.py says what is counted)")

    def row_fields(self) -> dict[str, float | str | None]:
        return {"flops_per_sample_declared": self.declared, "flops_per_sample_counted": self.counted,
                "mfu_flops_source": "counted" if self.declared_is_counted else MFU_USES}


def check_flops(workload: Workload, size: str, seed: int = 0) -> FlopsCheck:
    declared = float(workload.flops_per_sample(size))
    is_counted = bool(getattr(workload, "flops_counted", False))
    try:
        counted, device = count_flops_per_sample(workload, size, seed)
    except FlopCountError as error:
        return FlopsCheck(workload.name, size, declared, None, count_error=str(error), declared_is_counted=is_counted)
    return FlopsCheck(workload.name, size, declared, counted, counted_on=device, declared_is_counted=is_counted)
