"""Playing an evaluation's deals: in this process, or split over worker processes.

One process plays its deals in lockstep pools (`DuplicatePool`), every pending decision of a step
in one forward pass. On a machine with several cores, `workers` processes each take every
`workers`-th deal with their own copy of the networks; a deal's games depend only on the deal and
the seeds, never on which process plays it, so the results are the same for any number of workers.
Workers are started fresh (`spawn`), receive the checkpoints the parent already read (so a run
that writes a newer checkpoint meanwhile cannot mix two policies into one evaluation), import
nothing from the working directory (`trainspeed.safe_path`), and end with their parent.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from trainspeed.evaluate.config import MahjongEvalConfig
from trainspeed.evaluate.mahjong_network import network_player
from trainspeed.evaluate.policy import RunCheckpoint
from trainspeed.parent_death import die_with_parent
from trainspeed.safe_path import children_isolated
from trainspeed.targets import get_target
from trainspeed.workloads.mahjong.duplicate import BUILTIN_OPPONENTS, DealResult, DuplicatePool, Player, PoolTimes

POLL_S = 2.0
"""How often the parent checks that its workers are alive while it waits for their results."""


@dataclass(frozen=True)
class PlayedDeals:
    times: PoolTimes
    """Summed over the workers (seconds of each process)."""
    device_name: str


def _players(config: MahjongEvalConfig, policy: RunCheckpoint,
             opponent: RunCheckpoint | None) -> tuple[Player, Player, str]:
    target = get_target(config.target)
    evaluated, _ = network_player(policy, target)
    rival: Player
    if opponent is None:
        rival = BUILTIN_OPPONENTS[config.opponent]
    elif opponent.checkpoint.resolve() == policy.checkpoint.resolve():
        rival = evaluated  # the same network: its seats share every forward pass
    else:
        rival, _ = network_player(opponent, target)
    return evaluated, rival, target.device_name()


def play_in_process(config: MahjongEvalConfig, policy: RunCheckpoint, opponent: RunCheckpoint | None,
                    deals: Sequence[int], on_deal: Callable[[DealResult], None],
                    on_game: Callable[[], None] | None = None) -> PlayedDeals:
    evaluated, rival, device_name = _players(config, policy, opponent)
    pool = DuplicatePool(evaluated, rival, seed=config.seed, temperature=config.temperature,
                         pool_size=config.batch_games, on_game=on_game)
    for result in pool.play(deals):
        on_deal(result)
    return PlayedDeals(pool.times, device_name)


def _worker(config: MahjongEvalConfig, policy: RunCheckpoint, opponent: RunCheckpoint | None,
            deals: list[int], results: multiprocessing.Queue, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        played = play_in_process(config, policy, opponent, deals, lambda result: results.put(("deal", result)))
        results.put(("done", played))
    except BaseException as error:  # reported to the parent as one line; the worker then ends
        results.put(("error", f"{type(error).__name__}: {error}"))


def _add_times(total: PoolTimes, part: PoolTimes) -> None:
    for name in vars(total):
        setattr(total, name, getattr(total, name) + getattr(part, name))


def play_in_workers(config: MahjongEvalConfig, policy: RunCheckpoint, opponent: RunCheckpoint | None,
                    deals: Sequence[int], on_deal: Callable[[DealResult], None]) -> PlayedDeals:
    context = multiprocessing.get_context("spawn")
    shares = [list(deals[index::config.workers]) for index in range(config.workers)]
    with children_isolated():  # the queue starts multiprocessing's resource tracker, a child too
        results = context.Queue()
        workers = [context.Process(target=_worker, args=(config, policy, opponent, share, results, os.getpid()),
                                   daemon=True) for share in shares if share]
        for worker in workers:
            worker.start()
    total, device_name, running = PoolTimes(), "", len(workers)
    try:
        while running:
            try:
                message = results.get(timeout=POLL_S)
            except queue_module.Empty:
                dead = [w for w in workers if w.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"an evaluation worker died (exit code {dead[0].exitcode})") from None
                continue
            if message[0] == "deal":
                on_deal(message[1])
            elif message[0] == "done":
                _add_times(total, message[1].times)
                device_name = message[1].device_name
                running -= 1
            else:
                raise RuntimeError(f"an evaluation worker failed: {message[1]}")
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
    return PlayedDeals(total, device_name)


def play_deals(config: MahjongEvalConfig, policy: RunCheckpoint, opponent: RunCheckpoint | None,
               deals: Sequence[int], on_deal: Callable[[DealResult], None],
               on_game: Callable[[], None]) -> PlayedDeals:
    """Play `deals`; `on_deal` receives each finished deal (in the order deals finish)."""
    if config.workers == 1 or len(deals) < 2:
        return play_in_process(config, policy, opponent, deals, on_deal, on_game)

    def deal_played(result: DealResult) -> None:
        for _ in result.ranks:
            on_game()
        on_deal(result)

    return play_in_workers(config, policy, opponent, deals, deal_played)
