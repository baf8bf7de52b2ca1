"""Count model FLOPs of arbitrary code, including double backward (a gradient penalty such as R1).

torch's FlopCounterMode tracks modules with backward hooks that refuse to run inside
`autograd.grad`; this mode keeps only the part we need: torch's own per-op FLOP formulas
(convolutions, matmuls and their backward ops), and ours for ops torch has none for (a grouped
matmul: `flop_formulas.py`), summed over everything dispatched. Its total is FlopCounterMode's
global count wherever FlopCounterMode runs, plus those ops. Workloads count their own FLOPs
with it (StyleGAN3), and the bench checks every workload's declared count with it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from trainspeed.workloads.base import setup_optimizers
from trainspeed.workloads.dispatch_modes import SerialDispatchMode
from trainspeed.workloads.flop_formulas import flop_formula
from trainspeed.workloads.math_attention import MathAttention
from trainspeed.workloads.meta import (BuildFailed, CheckStopped, check_limits, current_limits, device_of,
                                      run_without_memory)

if TYPE_CHECKING:
    from trainspeed.workloads.base import Trainable, Workload


class FlopSum(SerialDispatchMode):
    """Context manager; `total` is the FLOPs (multiply-add = 2) dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_formula(func)
        if formula is not None:
            self.total += int(formula(*args, **kwargs, out_val=out))
        return out


COUNT_BATCH = 2
"""Samples in the counted step: more than one (batch norm refuses a batch of one), and small."""
COUNTED_STEP = 1
"""The step counted (0-based): the second, after any one-off work of the first."""
COUNT_TIME_FACTOR = 6
"""The count's time limit, in the size check's: its two training steps take about six forward
passes (the check runs one)."""


class FlopCountError(RuntimeError):
    """The counted steps ran nowhere: the message says why on meta and why not (or why) on the host."""


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}"


def count_flops_per_sample(workload: "Workload", size: str, seed: int = 0) -> tuple[float, str]:
    """FLOPs counted in step COUNTED_STEP of a fresh build, per sample, under the math SDPA backend
    (its matmuls are counted; a fused attention kernel's are not), and the device it ran on.

    The build and the steps run on the meta device: shapes only, no memory (the model is built
    there, never on the host first), within the check's time limit. Where meta cannot run them (a
    step that reads a value, or whose shapes depend on the data), they run on the host CPU, but
    only for a model small enough to build there (`trainspeed.workloads.meta`). The global RNG is
    left as it was (building and stepping draw from it)."""

    def build() -> "Trainable":
        trainable = workload.build(size, seed)
        setup_optimizers(trainable, fused=False)
        return trainable

    def steps(trainable: "Trainable") -> float:
        device = device_of(trainable)
        with torch.device(device):  # on meta, a batch of any size costs nothing
            made = workload.synthetic_batch(size, COUNT_BATCH, torch.Generator().manual_seed(seed))
        batch = {key: tensor.to(device) for key, tensor in made.items()}
        with MathAttention():
            for _ in range(COUNTED_STEP):
                trainable.train_step(batch)
            with FlopSum() as counter:
                trainable.train_step(batch)
        return counter.total / COUNT_BATCH

    limits = current_limits()
    with torch.random.fork_rng(devices=[]), check_limits(replace(limits, time_s=limits.time_s * COUNT_TIME_FACTOR)):
        try:
            ran = run_without_memory(build, steps)
        except BuildFailed as error:
            raise FlopCountError(f"the model cannot be built ({_first_line(error.__cause__ or error)})") from None
        except CheckStopped as error:
            raise FlopCountError(f"the counted steps stopped: {error}") from None
        except Exception as error:  # noqa: BLE001 - meta could not run the steps, and the host failed them
            raise FlopCountError(f"the steps fail on the host: {_first_line(error)}") from None
    if ran.result is None:
        raise FlopCountError(f"meta cannot run the steps ({_first_line(ran.meta_error)}) and the host did not "
                             f"run them: {ran.host_skipped}")
    return ran.result, ran.device
