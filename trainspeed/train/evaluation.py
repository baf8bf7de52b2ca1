"""Validation of a policy: action accuracy on held-out games, beside the majority baseline.

Accuracy alone says little: if one action (say, a common discard) were 30% of all decisions, 30%
would be free. So the pass also counts the actions taken and reports the majority baseline: the
accuracy of always answering the most common action of the validation set. Each rank evaluates its
slice of the validation split; sums are reduced over ranks, so the numbers are the whole split's.

The workload's Trainable supplies per-batch sums through `eval_metrics(batch)` (`loss_sum`,
`correct`, `count`); a workload without it (StyleGAN3) is trained without a validation pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainspeed.data.base import BatchLoader
from trainspeed.targets.base import Target
from trainspeed.train.distributed import Collectives
from trainspeed.workloads.base import Trainable

SUM_KEYS = ("loss_sum", "correct", "count")


@dataclass(frozen=True)
class EvalRecord:
    """One `kind: val` row of metrics.jsonl."""

    step: int
    samples: int
    loss: float
    accuracy: float
    majority_baseline: float
    kind: str = "val"


def can_evaluate(trainable: Trainable) -> bool:
    return type(trainable).eval_metrics is not Trainable.eval_metrics


def evaluate_policy(
    trainable: Trainable,
    loader: BatchLoader,
    target: Target,
    collectives: Collectives,
    *,
    step: int,
    num_actions: int,
    max_batches: int | None,
) -> EvalRecord | None:
    """One pass over this rank's validation slice (from its start), reduced over ranks.

    None when the split is empty: a small dataset may hold no validation game at all."""
    networks = list(trainable.networks.values())
    modes = [network.training for network in networks]
    for network in networks:
        network.eval()
    sums = {key: torch.zeros((), dtype=torch.float64, device=target.device) for key in SUM_KEYS}
    action_counts = torch.zeros(num_actions, dtype=torch.float64, device=target.device)
    loader.set_epoch(0)
    try:
        with torch.no_grad(), target.autocast():
            for index, host_batch in enumerate(loader):
                if max_batches is not None and index >= max_batches:
                    break
                batch = target.move_batch(host_batch)
                for key, value in trainable.eval_metrics(batch).items():
                    if key in sums:
                        sums[key] += value.double()
                action_counts += torch.bincount(batch["action"], minlength=num_actions).double()
                target.after_step()
    finally:
        for network, mode in zip(networks, modes):
            network.train(mode)
    loss_sum, correct, count = collectives.sum([float(sums[key].cpu()) for key in SUM_KEYS])
    counts = collectives.sum_tensor(action_counts.cpu())
    if count == 0:
        return None
    return EvalRecord(
        step=step,
        samples=int(count),
        loss=loss_sum / count,
        accuracy=correct / count,
        majority_baseline=float(counts.max()) / count,
    )
