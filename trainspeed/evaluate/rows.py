"""The evaluations' rows: a policy's duplicate games (`mahjong-eval`), its agreement with the
teacher (`mahjong-agreement`) and the null test of the interval (`mahjong-null-test`).

The report and the studies read them without torch, so this module imports none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from trainspeed.machine import Machine
from trainspeed.rows import KIND, Signed, parse_row, read_records


@dataclass(frozen=True)
class MahjongEvalRow:
    """One finished evaluation, one JSON line of OUT (the report reads these names)."""

    KIND: ClassVar[str] = "mahjong-eval"
    SCHEMA_VERSION: ClassVar[int] = 2
    """2: the evaluation's seed is `eval_seed`, beside the policies' training seeds, the samples the
    policy trained on, the within-deal correlation and the worker count (1 had one `seed`)."""

    timestamp: str
    policy: str
    policy_size: str
    policy_step: int
    opponent: str
    games: int
    deals: int
    eval_seed: int
    """Chooses the deals (deal d has engine seed deal_seed(eval_seed, d)); not a training seed."""
    policy_seed: int | None
    """The evaluated policy's training seed (its run's --seed); None in rows converted from version 1."""
    policy_samples: int | None
    """Samples the evaluated policy had trained on: its step x its run's global batch (None: version 1)."""
    opponent_seed: int | None
    """The opponent policy's training seed; None for a built-in opponent."""
    target: str
    temperature: float
    mean_rank: float
    mean_rank_ci95: list[float] | None
    mean_score_delta: float
    mean_score_delta_ci95: list[float] | None
    rank_distribution: list[float]
    games_per_s: float
    decisions_per_s: float
    engine_s: float
    network_s: float
    threads: int
    torch_version: str
    command: str
    # --- beyond the fixed schema -----------------------------------------------------------------
    mean_rank_ci95_half_width: float | None
    """t x standard error of the mean rank (the interval above is clipped to [1, 4])."""
    within_deal_correlation: float | None
    """Intraclass correlation of the policy's ranks within a deal's four games: above 0, a deal's
    luck did not cancel out between its rotations (the interval, clustered by deal, allows for it)."""
    eval_id: str
    policy_checkpoint: str
    opponent_size: str | None
    opponent_step: int | None
    deal_seeds: str
    games_played: int
    """Games played by this invocation (the rest were read from the progress file)."""
    wall_s: float
    encode_s: float
    decisions: int
    """Choices that went through a network in this invocation (one-legal-action turns never do)."""
    forward_calls: int
    batch_games: int
    workers: int
    device: str
    engine: str
    deal_ranks: list[list[int]]
    """Per deal (in deal order), the policy's rank in rotations 0-3: two evaluations with one seed
    played the same deals, so their rows can be compared deal by deal (a paired comparison)."""
    deal_score_deltas: list[list[Signed]]
    workload_module: str | None = None
    """The identity of the Mahjong workload code that played (`trainspeed.workloads.identity`)."""
    workload_version: str | None = None
    workload_sha256: str | None = None
    cpu_s_per_wall_s: float | None = None
    """This process's CPU seconds per wall second over the games it played."""
    machine: Machine | None = None


def read_eval_rows(path: str | os.PathLike) -> list[MahjongEvalRow]:
    """The `mahjong-eval` rows of a results file (rows of other kinds are skipped)."""
    return [parse_row(MahjongEvalRow, record, source)[0] for record, source in read_records(path)
            if isinstance(record, dict) and record.get(KIND) == MahjongEvalRow.KIND]


@dataclass(frozen=True)
class MahjongAgreementRow:
    """One policy on one split: agreement per decision kind (None: the split has none of that kind)."""

    KIND: ClassVar[str] = "mahjong-agreement"
    SCHEMA_VERSION: ClassVar[int] = 1

    timestamp: str
    policy: str
    policy_size: str
    policy_step: int
    data: str
    split: str
    samples: int
    agreement: dict[str, float | None]
    """Per kind of the teacher's action, plus `overall`, `discard_building` and `discard_folding`."""
    samples_per_kind: dict[str, int]
    discard_errors: dict[str, int]
    """Wrong answers to discards made while building a hand, by what they cost (see decisions.py)."""
    folding_samples: int
    chosen_kinds: dict[str, dict[str, int]]
    """For each kind the teacher chose, how often the policy chose each kind."""
    target: str
    threads: int
    wall_s: float
    command: str
    machine: Machine
    workload_module: str | None = None
    """The identity of the Mahjong workload code that answered (`trainspeed.workloads.identity`)."""
    workload_version: str | None = None
    workload_sha256: str | None = None


@dataclass(frozen=True)
class NullTestRow:
    KIND: ClassVar[str] = "mahjong-null-test"
    SCHEMA_VERSION: ClassVar[int] = 1

    timestamp: str
    policy: str
    policy_step: int
    temperature: float
    games_per_seed: int
    eval_seeds: list[int]
    covered: int
    """Evaluations whose 95% interval contains 2.5."""
    coverage: float
    coverage_ci95: list[float]
    """Wilson interval of the coverage over the seeds."""
    mean_ranks: list[float]
    within_deal_correlations: list[float | None]
    eval_ids: list[str]
    command: str
    machine: Machine
