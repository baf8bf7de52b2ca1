"""The Trainable the `jax` family hands to the bench and the trainer: the workload's networks and
optimizers stay here as the torch objects the step was traced from, and the values live in one
flat JAX state that each step replaces.

- the learning rates: the trainer's schedulers set the param groups of the workload's own
  optimizers, as on any target, and each step passes them to the program as an input;
- micro-batches (the noise-scale meter's slices, a batch past the memory cap): a step over k
  slices is one program per k of its own (`FunctionalStep.train_in_slices`), whose squared norms
  are host scalars read when the noise-scale meter adds them (so a step it measures waits for its
  program) and never where nothing reads them (a memory cap's slices without the meter);
- the loss: a host tensor whose value is read from the device when it is first used, or when the
  target syncs (`PendingLoss`): reading each step's loss at once would make the host wait for
  every step, so the next one could not be queued behind it;
- checkpoints: `state_dict` converts the state to the trainable's own `state_dict` layout of host
  tensors, and `load_state_dict` converts one back.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch

from trainspeed.errors import UsageError
from trainspeed.jaxrt import CompiledPrograms
from trainspeed.targets.jaxjit.functional import FunctionalStep, State, refuse_untraceable
from trainspeed.jaxrt.placement import Placement, one_device
from trainspeed.workloads.base import Batch, Trainable
from trainspeed.workloads.phases import PhasedTrainable, StepPhase


class PendingLoss(torch.Tensor):
    """A host scalar (a step's loss, a gradient's squared norm) whose value is a device array's:
    any torch use of it (`float`, `torch.stack`) first waits for that array and copies it in;
    after that it is an ordinary tensor."""

    _array: Any = None

    @staticmethod
    def __new__(cls, array: Any) -> "PendingLoss":
        tensor = torch.Tensor._make_subclass(cls, torch.full((), float("nan")))
        tensor._array = array
        return tensor

    def resolve(self) -> None:
        if self._array is not None:
            value, self._array = float(self._array), None
            with torch._C.DisableTorchFunctionSubclass():
                self.fill_(value)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch.utils import _pytree

        for value in _pytree.tree_leaves((args, kwargs or {})):
            if isinstance(value, PendingLoss):
                value.resolve()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class JaxTrainable(Trainable):
    buffers_in_networks = False  # they are leaves of `state`, which `state_dict` converts

    def __init__(self, functional: FunctionalStep, state: State, on_compile: Callable[[], None] | None = None,
                 placement: Placement | None = None) -> None:
        super().__init__(functional.trainable.networks)
        self.placement = placement or one_device()
        """Where the state lives: one device, or a data-parallel mesh (copied to each device or split)."""
        self.functional = functional
        self.optimizers = functional.trainable.optimizers
        self.state = state
        self.train_programs = CompiledPrograms(self.placement.traced_step(functional.train), donate_argnums=(0,),
                                               on_compile=on_compile)
        self.eval_programs = CompiledPrograms(self.placement.traced(functional.evaluate), on_compile=on_compile)
        self.sliced_programs: dict[int, CompiledPrograms] = {}
        """Per count of slices, the programs of a step over that many (`train_step_in_slices`)."""
        self.phase_programs: dict[tuple[StepPhase, ...], CompiledPrograms] = {}
        """Per list of phases, the programs of a phased workload's step (`FunctionalStep.train_phases`)."""
        self.last_programs = self.train_programs
        """The training programs the last step ran: their compile seconds and costs are the rows'."""
        self._on_compile = on_compile
        self.pending: list[PendingLoss] = []
        """Losses of steps not yet synced."""

    def to(self, device: torch.device) -> "JaxTrainable":
        return self

    def setup_optimizers(self, fused: bool = False) -> None:
        """Created on torchax when the step was traced."""

    def wrap(self, wrapper: Any) -> None:
        """The step is one jitted program; there is nothing to wrap."""

    def trained_network_names(self) -> list[str]:
        return self.functional.trainable.trained_network_names()

    def parameter_count(self) -> int:
        return sum(int(tensor.shape.numel()) for tensor in self.functional.parameters.values())

    def _learning_rates(self) -> Any:
        import jax.numpy as jnp

        return jnp.asarray(self.functional.learning_rates(), dtype=jnp.float32)

    def train_step(self, batch: Batch) -> torch.Tensor:  # type: ignore[override]
        programs = self._step_programs()
        try:
            self.state, loss = programs(self.state, batch, self._learning_rates())
        except Exception as error:  # noqa: BLE001 - a trace failure is the workload's, in one line
            raise _traced_error(error, "its training step") from None
        self.last_programs = programs
        self._stepped()
        if self.functional.phased:
            self.functional.trainable.step += 1  # type: ignore[attr-defined]  # the host's counter picks the next phases
        return self._pending(loss)

    def _step_programs(self) -> CompiledPrograms:
        """The programs of this step: one function for a step of one backward(); for a phased
        workload, one per list of phases (StyleGAN3: with R1, without)."""
        if not self.functional.phased:
            return self.train_programs
        trainable: PhasedTrainable = self.functional.trainable  # type: ignore[assignment]
        phases = trainable.phases(trainable.step)
        if phases not in self.phase_programs:
            self.phase_programs[phases] = CompiledPrograms(
                self.placement.traced_step(functools.partial(self.functional.train_phases, phases=phases)),
                donate_argnums=(0,), on_compile=self._on_compile)
        return self.phase_programs[phases]

    def train_step_in_slices(self, batch: Batch, parts: int, permutation: torch.Tensor | None
                             ) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
        """One step over `parts` slices in one program (`GradientAccumulation`'s `StepsInSlices`)."""
        import numpy as np

        if self.functional.phased:
            raise UsageError("train: micro-batches: a step of several updates (its phases) runs whole on the jax "
                             "family; train without --noise-scale-micro-batches and with the batch in memory")
        size = next(iter(batch.values())).shape[0]
        if size % parts:
            raise UsageError(f"train: micro-batches: {parts} slices need a batch whose first dimension is "
                             f"divisible by {parts}, got {size}")
        order = np.arange(size, dtype=np.int32) if permutation is None else permutation.numpy().astype(np.int32)
        programs = self.sliced_programs.get(parts)
        if programs is None:
            programs = self.sliced_programs[parts] = CompiledPrograms(
                self.placement.traced_step(functools.partial(self.functional.train_in_slices, parts=parts)),
                donate_argnums=(0,), on_compile=self._on_compile)
        try:
            self.state, loss, small_sq, big_sq = programs(self.state, batch, self._learning_rates(), order)
        except Exception as error:  # noqa: BLE001
            raise _traced_error(error, "its training step in micro-batches") from None
        self.last_programs = programs
        self._stepped()
        # read when the meter adds them (a step it measures waits for its program); never, where no meter reads them
        norms = {name: (PendingLoss(small_sq[name]), PendingLoss(big_sq[name])) for name in small_sq}
        return self._pending(loss), norms

    def _stepped(self) -> None:
        for optimizer in self.optimizers.values():
            optimizer._opt_called = True  # type: ignore[attr-defined]  # LR schedulers check that a step ran

    def _pending(self, loss: Any) -> PendingLoss:
        pending = PendingLoss(loss)
        self.pending.append(pending)
        return pending

    def sync(self) -> None:
        """Wait for every step sent, and read their losses."""
        import jax

        jax.block_until_ready(self.state)
        for pending in self.pending:
            pending.resolve()
        self.pending.clear()

    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor] | None:  # type: ignore[override]
        import numpy as np

        try:
            metrics = self.eval_programs(self.state, batch)
        except Exception as error:  # noqa: BLE001
            raise _traced_error(error, "its validation step") from None
        if not metrics:
            return None
        return {name: torch.from_numpy(np.array(value)) for name, value in metrics.items()}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        return self.functional.trainable.summarize_eval(totals)

    def state_dict(self) -> dict:
        self.sync()
        return self.functional.torch_state_dict(self.state)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.sync()
        self.state = self.placement.put_state(self.functional.state_from_torch(dict(state), self.state))


def _traced_error(error: BaseException, what: str) -> BaseException:
    """Out of memory and the step's own UsageErrors as they are; a failure to trace in one line."""
    from trainspeed.jaxrt import is_oom

    if is_oom(error) or isinstance(error, UsageError):
        return error
    return refuse_untraceable(error, what)
