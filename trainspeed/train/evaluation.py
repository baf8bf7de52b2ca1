"""Validation: the workload's own held-out metrics over the whole validation split, all ranks.

The trainer knows no metric: per batch the workload's `eval_metrics` returns additive sums (a loss
sum, a count of correct answers, a class histogram, ...) as device tensors. They are added over this
rank's slice of the split, then over ranks, and the workload's `summarize_eval` turns the totals
into named metrics (Mahjong: loss, accuracy and the majority baseline it is read against). A
workload without `eval_metrics` (StyleGAN3) is trained without a validation pass.
"""

from __future__ import annotations

import torch

from trainspeed.data.base import BatchLoader
from trainspeed.errors import UsageError
from trainspeed.targets.base import BatchPlacer, Target
from trainspeed.train.distributed import Collectives
from trainspeed.train.rows import EvalRecord
from trainspeed.workloads.base import Trainable, Workload


def can_evaluate(trainable: Trainable) -> bool:
    return type(trainable).eval_metrics is not Trainable.eval_metrics


def metric_names(trainable: Trainable, workload: Workload, size: str) -> list[str]:
    """The validation metrics the workload reports, from one pass of `trainable` (the workload
    built on the host) over a synthetic batch of two, before a run starts, to check what `--until`
    names; UsageError when it has none."""
    if not can_evaluate(trainable):
        raise UsageError(f"train: workload {workload.name!r} has no validation metrics (its Trainable defines no "
                         "eval_metrics), so it has no quality to reach; drop --until")
    batch = workload.synthetic_batch(size, 2, torch.Generator().manual_seed(0))
    for network in trainable.networks.values():
        network.eval()
    with torch.no_grad():
        sums = trainable.eval_metrics(batch) or {}
    return list(trainable.summarize_eval({name: value.detach().to(torch.float64) for name, value in sums.items()}))


def _add(totals: dict[str, torch.Tensor], sums: dict[str, torch.Tensor]) -> None:
    for name, value in sums.items():
        value = value.detach().to(torch.float64)
        totals[name] = totals[name] + value if name in totals else value


def evaluate(
    trainable: Trainable,
    loader: BatchLoader,
    target: Target,
    place: BatchPlacer,
    collectives: Collectives,
    *,
    step: int,
    max_batches: int | None,
) -> EvalRecord | None:
    """One pass over this rank's validation slice (from its start), reduced over ranks.

    None when the split is empty on every rank: a small dataset may hold no validation sample."""
    networks = list(trainable.networks.values())
    modes = [network.training for network in networks]
    for network in networks:
        network.eval()
    totals: dict[str, torch.Tensor] = {}
    loader.set_epoch(0)
    try:
        with torch.no_grad(), target.autocast():
            for index, host_batch in enumerate(loader):
                if max_batches is not None and index >= max_batches:
                    break
                _add(totals, trainable.eval_metrics(place(host_batch)))
                target.after_step()
    finally:
        for network, mode in zip(networks, modes):
            network.train(mode)
    # A rank whose slice was empty has no totals; every rank must still join each reduction.
    shapes: dict[str, tuple[int, ...]] = {}
    for rank_shapes in collectives.gather_objects({name: tuple(total.shape) for name, total in totals.items()}):
        shapes.update(rank_shapes)
    if not shapes:
        return None
    reduced = {
        name: collectives.sum_tensor(totals[name].cpu() if name in totals else torch.zeros(shape, dtype=torch.float64))
        for name, shape in sorted(shapes.items())
    }
    return EvalRecord(step=step, metrics=trainable.summarize_eval(reduced))
