"""A training step of several updates, declared phase by phase (a GAN's G and D updates, a lazy
regularizer every few steps), so that every target runs the same step.

On torch targets `PhasedTrainable.train_step` runs the phases in order: each phase's loss with
the networks as the phases before it left them, its backward, and its optimizer's step; then the
work that needs no gradients (an EMA copy). A target that has no autograd to call backward on
(the jax family) differentiates each phase's loss as a function of the parameters its optimizer
steps instead. Which phases a step has depends only on the host's step counter
(`phases(step)`), so such a target compiles one program per distinct list of phases (StyleGAN3:
with R1 and without), and a machine that runs exported programs picks one per step the same way.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import torch

from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable


@dataclass(frozen=True)
class StepPhase:
    """One update of a step: the loss named `name` moves the parameters `optimizer` steps."""

    name: str
    optimizer: str


def variant_name(phases: tuple[StepPhase, ...]) -> str:
    """The phases of a step as one word ("G+D+R1"): the name its program goes by."""
    return "+".join(phase.name for phase in phases)


class PhasedTrainable(Trainable):
    """A Trainable whose step is its phases in order, then `after_updates`; `step` counts steps."""

    step: int = 0
    last_losses: dict[str, torch.Tensor] = {}
    """The detached losses of the latest step by phase name (a new dict each step); reading them syncs."""

    @abstractmethod
    def phases(self, step: int) -> tuple[StepPhase, ...]:
        """The phases of step number `step` (from 0), in the order they run."""

    def prepared(self, batch: Batch) -> Batch:
        """The batch as every phase reads it (checked, converted on the device): made once per step."""
        return batch

    @abstractmethod
    def phase_loss(self, phase: StepPhase, batch: Batch) -> torch.Tensor:
        """`phase`'s loss on the prepared batch, with the networks as the phases before it left them."""

    def after_updates(self, batch: Batch) -> None:
        """Work after the updates that trains nothing (an EMA copy of a network)."""

    def returned_loss(self, losses: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the step returns from its phases' detached losses (by default their sum)."""
        return torch.stack(list(losses.values())).sum()

    def train_only(self, phase: StepPhase) -> None:
        """Only the parameters `phase` updates require gradients: backward computes no gradient
        that its optimizer would throw away."""
        updated = {id(parameter) for group in self.optimizers[phase.optimizer].param_groups
                   for parameter in group["params"]}
        for name in self.trained_network_names():
            for parameter in self.networks[name].parameters():
                parameter.requires_grad_(id(parameter) in updated)

    def train_step(self, batch: Batch) -> torch.Tensor:
        prepared = self.prepared(batch)
        losses: dict[str, torch.Tensor] = {}
        for phase in self.phases(self.step):
            self.train_only(phase)
            loss = self.phase_loss(phase, prepared)
            optimizer = self.optimizers[phase.optimizer]
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses[phase.name] = loss.detach()
        self.after_updates(prepared)
        self.step += 1
        self.last_losses = losses
        return self.returned_loss(losses)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.step = int(state["step"])


LONGEST_CYCLE = 1024


def phase_cycle(trainable: PhasedTrainable) -> list[tuple[StepPhase, ...]]:
    """The phases of steps 0, 1, ... up to where they repeat: what a machine that runs exported
    programs needs to pick each step's program without the workload's Python."""
    seen = [trainable.phases(step) for step in range(2 * LONGEST_CYCLE)]
    for period in range(1, LONGEST_CYCLE + 1):
        if all(phases == seen[step % period] for step, phases in enumerate(seen)):
            return seen[:period]
    raise UsageError(f"the phases of the workload's steps do not repeat within {LONGEST_CYCLE} steps; an exported "
                     "step picks its program from a repeating list")
