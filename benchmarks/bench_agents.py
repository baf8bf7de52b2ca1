"""Rule-based agent strength (vs random, vs itself) and self-play data speed.

    .venv/bin/python benchmarks/bench_agents.py [--games 200] [--workers 2]

Match "rule_vs_random": one rule-based agent and three random agents, the rule-based seat rotating
with the game number; its average rank (1 best, 4 worst, 2.5 = no better than the table).
Match "rule_vs_no_defence": two rule-based agents against two without the defence rule (seats
alternating); the full agent's average rank says what folding against a riichi is worth.
Match "rule_vs_rule": four rule-based agents, as in self-play data; per-seat average ranks (about
2.5 each when the seats are fair) and per-hand rates of wins, deal-ins, riichi and draws.
Speed: CPU seconds per game and samples per CPU-second of rule-based self-play with encoding (what
`data mahjong-selfplay` does minus file writes), and the time 200k samples take at that rate with
`--workers` processes on as many free cores.
Writes --out (default results/agents_bench.jsonl).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from trainspeed.atomic import atomic_write_text
from trainspeed.child_start import child_context, starting
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.machine import Machine
from trainspeed.rows import row_line
from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent
from trainspeed.workloads.mahjong.data.selfplay import game_seed
from trainspeed.workloads.mahjong.encoding import encode_decisions
from trainspeed.workloads.mahjong.engine import play_game

SAMPLES_TARGET = 200_000


@dataclass
class GameSummary:
    ranks: list[int]
    rule_seats: list[int]
    samples: int
    cpu_seconds: float
    hands: int
    outcomes: dict = field(default_factory=dict)


def hand_outcomes(log: list[dict]) -> tuple[int, Counter]:
    """Hands played, and per-seat counts: win (tsumo or ron), deal_in, riichi; plus draws."""
    counts: Counter = Counter()
    hands = 0
    for event in log:
        kind = event.get("type")
        if kind == "start_kyoku":
            hands += 1
        elif kind == "hora":
            counts[f"win_{event['actor']}"] += 1
            if event.get("target") is not None and event["target"] != event["actor"]:
                counts[f"deal_in_{event['target']}"] += 1
        elif kind == "reach":
            counts[f"riichi_{event['actor']}"] += 1
        elif kind == "ryukyoku":
            counts["draw"] += 1
    return hands, counts


def _table(match: str, game: int) -> tuple[list, list[int]]:
    """The four agents of one game and the seats of the agent under test (rotating with the game)."""
    if match == "rule_vs_random":
        seats = [game % 4]
        return [RuleBasedAgent() if s in seats else RandomAgent(game * 4 + s) for s in range(4)], seats
    if match == "rule_vs_no_defence":
        seats = [game % 2, game % 2 + 2]
        return [RuleBasedAgent(fold_against_riichi=s in seats) for s in range(4)], seats
    return [RuleBasedAgent() for _ in range(4)], [0, 1, 2, 3]


def play_one(match: str, game: int) -> GameSummary:
    agents, rule_seats = _table(match, game)
    start = time.process_time()  # CPU time: wall time on a shared host says little about the code
    record = play_game(agents, seed=game_seed(12345, game))
    samples = len(encode_decisions(record.decisions, game))
    cpu_seconds = time.process_time() - start
    hands, outcomes = hand_outcomes(record.mjai_log)
    return GameSummary(list(record.ranks), rule_seats, samples, cpu_seconds, hands, dict(outcomes))


def _play(args: tuple[str, int]) -> GameSummary:
    return play_one(*args)


@dataclass(frozen=True)
class MatchRow:
    match: str
    games: int
    rule_mean_rank: float
    rule_rank_stderr: float
    seat_mean_ranks: list[float]
    win_rate_per_hand: float
    deal_in_rate_per_hand: float
    riichi_rate_per_hand: float
    draw_rate_per_hand: float
    samples_per_game: float
    cpu_seconds_per_game: float
    samples_per_cpu_s: float
    workers: int
    minutes_for_200k_samples: float
    """At `samples_per_cpu_s` in each of `workers` processes, one core each."""


def summarize(match: str, games: list[GameSummary], workers: int) -> MatchRow:
    rule_ranks = np.array([g.ranks[s] for g in games for s in g.rule_seats], dtype=float)
    seat_ranks = np.array([g.ranks for g in games], dtype=float).mean(axis=0)
    hands = sum(g.hands for g in games)
    totals: Counter = Counter()
    for g in games:
        for key, value in g.outcomes.items():
            if key == "draw" or int(key.rsplit("_", 1)[1]) in g.rule_seats:
                totals[key.rsplit("_", 1)[0]] += value
    rule_hand_seats = sum(g.hands * len(g.rule_seats) for g in games)
    samples = sum(g.samples for g in games)
    seconds = sum(g.cpu_seconds for g in games)
    rate = samples / seconds
    return MatchRow(
        match=match, games=len(games), rule_mean_rank=float(rule_ranks.mean()),
        rule_rank_stderr=float(rule_ranks.std(ddof=1) / np.sqrt(len(rule_ranks))),
        seat_mean_ranks=[round(float(r), 3) for r in seat_ranks],
        win_rate_per_hand=totals["win"] / rule_hand_seats, deal_in_rate_per_hand=totals["deal_in"] / rule_hand_seats,
        riichi_rate_per_hand=totals["riichi"] / rule_hand_seats, draw_rate_per_hand=totals["draw"] / hands,
        samples_per_game=samples / len(games), cpu_seconds_per_game=seconds / len(games),
        samples_per_cpu_s=rate, workers=workers,
        minutes_for_200k_samples=SAMPLES_TARGET / (rate * workers) / 60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/agents_bench.jsonl"))
    args = parser.parse_args(argv)
    rows = []
    machine = Machine.at_start()
    context = child_context()  # forked, unless JAX has started in this process (a caller's)
    with starting(context):
        pool = context.Pool(args.workers)
    with pool:
        for match in ("rule_vs_random", "rule_vs_no_defence", "rule_vs_rule"):
            games = pool.map(_play, [(match, game) for game in range(args.games)], chunksize=4)
            rows.append(summarize(match, games, args.workers))
    command = shlex.join(["python", "benchmarks/bench_agents.py", *(sys.argv[1:] if argv is None else argv)])
    atomic_write_text(args.out, "".join(row_line(MeasurementRow.of("agents", row, command, machine.at_end())) + "\n"
                                        for row in rows))
    for row in rows:
        print(json.dumps(asdict(row), indent=1))
    print(f"cpu_count={os.cpu_count()}")


if __name__ == "__main__":
    main()
