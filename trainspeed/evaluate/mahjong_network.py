"""A Mahjong policy from a run directory as a seat of the duplicate games: batched inference on a target."""

from __future__ import annotations

import numpy as np
import torch

from trainspeed.evaluate.policy import NetworkRunner, RunCheckpoint, build_network
from trainspeed.targets.base import Target
from trainspeed.workloads.mahjong.duplicate import NetworkPlayer

WORKLOAD = "mahjong"
POLICY_NETWORK = "policy"


def _mahjong_forward(network: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits, _ = network(batch["features"], batch["mask"])
    return logits


def network_player(run: RunCheckpoint, target: Target) -> tuple[NetworkPlayer, NetworkRunner]:
    runner = NetworkRunner(build_network(run, POLICY_NETWORK), target, _mahjong_forward)

    def logits(features: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return runner({"features": features, "mask": mask})

    return NetworkPlayer(name=str(run.run_dir), logits=logits), runner
