"""`trainspeed eval mahjong-null`: does the evaluation's 95% interval cover the truth as often as it says?

A policy against three copies of itself is an even match: its expected mean rank is exactly 2.5.
Played greedily, the four rotations of a deal are then the same game and 2.5 comes out exactly by
construction, which checks the bookkeeping but not the interval. Sampling its moves (temperature
above 0) makes every game different while keeping the match even, so over many evaluation seeds
about 95% of the intervals should contain 2.5: far fewer would mean the interval is too narrow,
nearly all of them (over enough seeds to tell) that it is too wide.

Which way an interval would err that counted the four games of a deal as independent depends on
the sign of the within-deal correlation r: a deal's mean rank has variance sd^2 x (1 + 3r) / 4,
against sd^2 / 4 for four independent games. Above 0 (a deal's luck favours the policy in all four
rotations) such an interval is too narrow and covers less than 95%. Below 0 it is too wide and
covers more; and below 0 is what a policy against copies of itself gives (about -0.2 to -0.3):
its four rotations are nearly one game with its seat in each place once, so a good seat in one
rotation is a bad one in another. The evaluation's interval takes each deal as one observation
(`trainspeed.stats.clustered_mean`), which holds for either sign, so this test checks its
coverage, not its clustering: at a negative correlation a coverage of about 95% does not show the
clustering was needed (counting games as independent would have covered more often, not less).
The summary records every evaluation's within-deal correlation, so the sign a coverage was
measured under is known.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.evaluate.config import MahjongEvalConfig
from trainspeed.evaluate.mahjong import run_mahjong_eval
from trainspeed.evaluate.rows import MahjongEvalRow, NullTestRow
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.stats import wilson_interval
from trainspeed.user_json import check_rows_file

EVEN_RANK = 2.5


def covers_even(row: MahjongEvalRow) -> bool:
    low, high = row.mean_rank_ci95 or (row.mean_rank, row.mean_rank)
    return low <= EVEN_RANK <= high


def run_null_test(config: MahjongEvalConfig, seeds: int, command: str) -> NullTestRow:
    """One self-play evaluation per seed 0..seeds-1 (their rows go to `config.out`), then the summary."""
    if seeds < 2:
        raise UsageError(f"eval mahjong-null: --seeds {seeds}: need at least 2 evaluations to count coverage")
    if not config.temperature > 0:
        raise UsageError(f"eval mahjong-null: --temperature {config.temperature}: must be above 0 "
                         "(a greedy self-play is the same game in every seat and ranks exactly 2.5)")
    check_rows_file(Path(config.out), f"--out {config.out}", kinds=(MahjongEvalRow.KIND, NullTestRow.KIND))
    machine = Machine.at_start()
    rows = [run_mahjong_eval(dataclasses.replace(config, opponent=config.policy, seed=seed),
                             f"{command} [seed {seed}]", shares_file_with=(NullTestRow.KIND,)) for seed in range(seeds)]
    covered = sum(covers_even(row) for row in rows)
    low, high = wilson_interval(covered, len(rows))
    summary = NullTestRow(
        timestamp=datetime.datetime.now().isoformat(timespec="seconds"),
        policy=config.policy or "", policy_step=rows[0].policy_step, temperature=config.temperature,
        games_per_seed=config.games, eval_seeds=list(range(seeds)), covered=covered,
        coverage=covered / len(rows), coverage_ci95=[low, high], mean_ranks=[row.mean_rank for row in rows],
        within_deal_correlations=[row.within_deal_correlation for row in rows],
        eval_ids=[row.eval_id for row in rows], command=command, machine=machine.at_end())
    append_row(config.out, summary)
    return summary
