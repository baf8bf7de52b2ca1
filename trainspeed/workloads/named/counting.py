"""FLOPs per sample of a library's model: torch's count of one training step, never a formula.

A library builds a thousand architectures; no hand count could follow them all, and the formulas
of `torch.utils.flop_counter` see every matmul and convolution each one dispatches. The count runs
on the meta device (no memory, no arithmetic; on the host only for a small model, within a time
limit: `trainspeed.workloads.meta`) once per size and workload instance."""

from __future__ import annotations

from trainspeed.errors import UsageError
from trainspeed.workloads.flops import FlopCountError, count_flops_per_sample


class CountedFlops:
    flops_counted = True
    """`flops_per_sample` is torch's count of a training step (rows: mfu_flops_source "counted")."""

    def flops_per_sample(self, size: str) -> float:
        counts: dict[str, float] = self.__dict__.setdefault("_flops_per_sample", {})
        if size not in counts:
            try:
                counts[size] = count_flops_per_sample(self, size)[0]
            except FlopCountError as error:
                raise UsageError(f"--workload {getattr(self, 'name')}: no training step could be counted ({error})") from None
        return counts[size]
