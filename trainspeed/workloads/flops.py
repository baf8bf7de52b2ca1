"""Count model FLOPs of arbitrary code, including double backward (a gradient penalty such as R1).

torch's FlopCounterMode tracks modules with backward hooks that refuse to run inside
`autograd.grad`; this mode keeps only the part we need: torch's own per-op FLOP formulas
(convolutions, matmuls and their backward ops), summed over everything dispatched. Its total is
FlopCounterMode's global count wherever FlopCounterMode runs. Workloads count their own FLOPs
with it (StyleGAN3), and the bench checks every workload's declared count with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from trainspeed.workloads.base import setup_optimizers

if TYPE_CHECKING:
    from trainspeed.workloads.base import Workload


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


COUNT_BATCH = 2
"""Samples in the counted step: more than one (batch norm refuses a batch of one), and small."""
COUNTED_STEP = 1
"""The step counted (0-based): the second, after any one-off work of the first."""
COUNT_DEVICES = ("meta", "cpu")
"""Where the steps are tried, in order: meta costs no memory and no arithmetic; the host CPU runs
what meta cannot (a step that reads a value, or whose shapes depend on the data)."""


class FlopCountError(RuntimeError):
    """No device of COUNT_DEVICES could run the counted steps; the message says why on each."""


def counted_flops_per_sample(workload: "Workload", size: str, device: str, seed: int = 0) -> float:
    """FLOPs counted in step COUNTED_STEP of a fresh build on `device`, per sample, under the math
    SDPA backend (its matmuls are counted; a fused attention kernel's are not).

    The global RNG is left as it was (building and stepping draw from it)."""
    with torch.random.fork_rng(devices=[]):
        trainable = workload.build(size, seed).to(torch.device(device))
        setup_optimizers(trainable, fused=False)
        host_batch = workload.synthetic_batch(size, COUNT_BATCH, torch.Generator().manual_seed(seed))
        batch = {key: tensor.to(device) for key, tensor in host_batch.items()}
        with sdpa_kernel(SDPBackend.MATH):
            for _ in range(COUNTED_STEP):
                trainable.train_step(batch)
            with FlopSum() as counter:
                trainable.train_step(batch)
    return counter.total / COUNT_BATCH


def count_flops_per_sample(workload: "Workload", size: str, seed: int = 0) -> tuple[float, str]:
    """The count on the first device of COUNT_DEVICES that runs the steps, and that device."""
    failures = []
    for device in COUNT_DEVICES:
        try:
            return counted_flops_per_sample(workload, size, device, seed), device
        except Exception as error:  # noqa: BLE001 - a step that cannot run here may run on the next device
            message = str(error).strip().splitlines()
            failures.append(f"{device}: {type(error).__name__}: {message[0][:200] if message else ''}")
    raise FlopCountError("; ".join(failures))
