"""Count model FLOPs of arbitrary code, including double backward (a gradient penalty such as R1).

torch's FlopCounterMode tracks modules with backward hooks that refuse to run inside
`autograd.grad`; this mode keeps only the part we need: torch's own per-op FLOP formulas
(convolutions, matmuls and their backward ops), summed over everything dispatched. Its total is
FlopCounterMode's global count wherever FlopCounterMode runs. Workloads count their own FLOPs
with it (StyleGAN3), and the bench checks every workload's declared count with it.
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry


class FlopSum(TorchDispatchMode):
    """Context manager; `total` is the FLOPs (multiply-add = 2) dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += int(formula(*args, **kwargs, out_val=out))
        return out
