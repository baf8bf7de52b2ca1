"""The study's statistics, from rows alone: each global batch's validation over its seeds, its
strength in a framing over seeds and deals, the largest batch against the others and head to head,
and the verdict each interval supports."""

from __future__ import annotations

import math
from typing import Sequence

from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.stats import CrossedEstimate, crossed_bootstrap
from trainspeed.studies.batch_size.config import BatchSizeConfig
from trainspeed.studies.batch_size.rows import (
    EVEN_RANK,
    BatchSizeBatchRow,
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeStrengthRow,
)


def verdict(estimate: CrossedEstimate) -> str:
    low, high = estimate.ci95
    if high < 0:
        return "supported"
    if low > 0:
        return "contradicted"
    return f"inconclusive at a minimum detectable difference of {estimate.minimum_detectable_difference:.3f} ranks"


def deal_means(row: MahjongEvalRow) -> list[float]:
    return [sum(ranks) / len(ranks) for ranks in row.deal_ranks]


def _sd(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def strength_row(study_id: str, config: BatchSizeConfig, framing: str, batch: int, step: int,
                 evals: list[MahjongEvalRow]) -> BatchSizeStrengthRow:
    estimate = crossed_bootstrap([[deal_means(row) for row in evals]], (1,))
    per_seed = [row.mean_rank for row in evals]
    return BatchSizeStrengthRow(
        study_id=study_id, framing=framing, global_batch=batch, samples=step * batch, step=step,
        seeds=[row.policy_seed for row in evals], games_per_seed=evals[0].games,
        mean_rank=estimate.estimate, mean_rank_ci95=list(estimate.ci95), mean_rank_per_seed=per_seed,
        seed_sd=_sd(per_seed), within_deal_correlation=[row.within_deal_correlation for row in evals],
        eval_ids=[row.eval_id for row in evals])


def comparison_row(study_id: str, framing: str, largest: int, other: int, large: list[MahjongEvalRow],
                   small: list[MahjongEvalRow]) -> BatchSizeComparisonRow:
    estimate = crossed_bootstrap([[deal_means(r) for r in large], [deal_means(r) for r in small]], (1, -1))
    return BatchSizeComparisonRow(
        study_id=study_id, framing=framing, global_batch=largest, versus_batch=other,
        mean_rank_difference=estimate.estimate, ci95=list(estimate.ci95),
        minimum_detectable_difference=estimate.minimum_detectable_difference,
        seeds=min(estimate.seeds), deals=estimate.deals, verdict=verdict(estimate))


def head_to_head_row(study_id: str, largest: int, smallest: int, evals: list[MahjongEvalRow]) -> BatchSizeComparisonRow:
    estimate = crossed_bootstrap([[deal_means(row) for row in evals]], (1,), offset=-EVEN_RANK)
    return BatchSizeComparisonRow(
        study_id=study_id, framing="head to head", global_batch=largest, versus_batch=smallest,
        mean_rank_difference=estimate.estimate, ci95=list(estimate.ci95),
        minimum_detectable_difference=estimate.minimum_detectable_difference,
        seeds=estimate.seeds[0], deals=estimate.deals, verdict=verdict(estimate))


def batch_row(study_id: str, config: BatchSizeConfig, batch: int, runs: list[BatchSizeRunRow]) -> BatchSizeBatchRow:
    tuning = {row.lr_factor: row for row in runs if row.train_seed == config.tuning_seed}
    best = min(tuning, key=lambda factor: tuning[factor].val_loss)
    chosen = sorted((row for row in runs if row.lr_factor == best), key=lambda row: row.train_seed)
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    return BatchSizeBatchRow(
        study_id=study_id, global_batch=batch, best_lr_factor=best, peak_lr=chosen[0].peak_lr,
        steps=chosen[0].steps, seeds=[row.train_seed for row in chosen],
        lr_sweep={f"{factor:g}": row.val_loss for factor, row in sorted(tuning.items())},
        val_loss=mean([row.val_loss for row in chosen]), val_loss_per_seed=[row.val_loss for row in chosen],
        val_accuracy=mean([row.val_accuracy for row in chosen]),
        val_accuracy_per_seed=[row.val_accuracy for row in chosen], majority_baseline=chosen[0].majority_baseline,
        equal_steps_val_loss=mean([row.equal_steps_val_loss for row in chosen]),
        equal_steps_val_accuracy=mean([row.equal_steps_val_accuracy for row in chosen]),
        train_wall_s=mean([row.train_wall_s for row in chosen]))
