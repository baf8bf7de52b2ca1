"""The Trainable the remote target hands to the bench and the trainer: a stand-in for the one on
the server.

Networks and optimizer states stay on the server, as parameters stayed on the TPU in the study.
What the trainer needs here is kept here:

- the learning rates: each optimizer on the server has a `ProxyOptimizer` here with the same param
  groups, so the trainer's schedulers (torch LR schedulers want an Optimizer) set the rates as for
  a local run, and every step sends them;
- the state for checkpoints: `state_dict` fetches the server's (tensors as raw bytes, the rest as
  JSON; see `state.py`) with the learning rates of the proxies, which are the ones the next step
  will use, and `load_state_dict` sends a state back and sets the proxies from it.

The remote Trainable has no validation metrics (the trainer skips validation).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.client import RemoteBatch, Session
from trainspeed.workloads.base import Trainable

LR_KEYS = ("lr", "initial_lr")
"""Param-group entries the client's schedulers own (`initial_lr` is set by LR schedulers)."""


class ProxyOptimizer(torch.optim.Optimizer):
    """The param groups of an optimizer on the server, for schedulers to set; `step` does nothing
    here (the server steps), but is called once per step so schedulers see the usual order."""

    def __init__(self, learning_rates: list[float]) -> None:
        groups = [{"params": [torch.zeros(0)], "lr": lr} for lr in learning_rates]
        super().__init__(groups, defaults={"lr": learning_rates[0] if learning_rates else 0.0})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        return None


class RemoteTrainable(Trainable):
    def __init__(self, session: Session) -> None:
        super().__init__({})
        self.session = session
        opened = session.opened
        self.optimizers = {group.optimizer: ProxyOptimizer(list(group.lr)) for group in opened.optimizers}
        self._parameter_count = int(opened.parameter_count)

    def to(self, device: torch.device) -> "RemoteTrainable":
        return self  # the networks live on the server

    def setup_optimizers(self, fused: bool = False) -> None:
        """The server created them when it built the model."""

    def trained_network_names(self) -> list[str]:
        return []

    def wrap(self, wrapper: Any) -> None:
        """The server wrapped its networks for its own execution mode."""

    def learning_rates(self) -> dict[str, list[float]]:
        return {name: [group["lr"] for group in optimizer.param_groups] for name, optimizer in self.optimizers.items()}

    def train_step(self, batch: RemoteBatch) -> torch.Tensor:  # type: ignore[override]
        loss = self.session.step(batch, self.learning_rates())
        for optimizer in self.optimizers.values():
            optimizer.step()
        return loss

    def parameter_count(self) -> int:
        return self._parameter_count

    def state_dict(self) -> dict:
        state = self.session.get_state(pb.TRAINABLE)
        for name, optimizer in self.optimizers.items():
            groups = state["optimizers"][name]["param_groups"]
            for group, proxy_group in zip(groups, optimizer.param_groups):
                group.update({key: proxy_group[key] for key in LR_KEYS if key in proxy_group})
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.session.set_state(pb.TRAINABLE, state)
        for name, optimizer in self.optimizers.items():
            for group, proxy_group in zip(state["optimizers"][name]["param_groups"], optimizer.param_groups):
                proxy_group.update({key: group[key] for key in LR_KEYS if key in group})
