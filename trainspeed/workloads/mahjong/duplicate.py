"""Duplicate 1-vs-3 evaluation: one player against three copies of an opponent, on shared walls.

Luck dominates a single Mahjong game, so an evaluation that plays independent games needs many of
them to see a difference. Duplicate play removes part of the luck of the deal: every deal (one
engine seed) is played four times, with the evaluated player in seat 0, 1, 2 and 3 in turn
(rotation r puts it in seat r) and the opponent in the other three seats. The four rotations share
the walls of the first hand only: once play differs, later hands come in another order (who deals,
repeat counters) and with other walls, so from the second hand on the rotations' games diverge. Two
evaluations with the same seed play the same deals, so two policies are compared on identical
first hands and identical engine seeds. What is left of the deal's luck shows in the evaluation
row's within-deal correlation; the intervals treat each deal as one observation.

Games run in a pool of concurrent games stepped in lockstep: at each step every game's pending
decisions are collected, and all decisions for one policy network go through one call of its
`logits` function (one forward pass on the device), whatever game they come from. A decision with
a single legal action is taken without asking anyone.

The pool knows no torch and no device: a network seat is a `NetworkPlayer` whose `logits`
function the caller builds (`trainspeed.evaluate` runs it on a target).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, Union

import numpy as np
from riichienv import Action, Observation, RiichiEnv

from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent
from trainspeed.workloads.mahjong.encoding import encode_features, encode_mask
from trainspeed.workloads.mahjong.engine import SEATS, Agent, new_env

ROTATIONS = SEATS
"""Games per deal: the evaluated player sits in each seat once."""
EVAL_SEED_SALT = 0x6576616C  # "eval": evaluation walls differ from self-play's game_seed walls
MASK64 = 2**64 - 1

LogitsFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(features (n, 86, 34) float32, legal mask (n, 82) bool) -> logits (n, 82), host arrays."""


@dataclass(eq=False)
class NetworkPlayer:
    """A seat decided by a policy network. Identity matters: every pending decision of one step
    for the same NetworkPlayer (the evaluated policy and its copies) goes through one call."""

    name: str
    logits: LogitsFn


AgentFactory = Callable[[int], Agent]
"""Builds the agent of one seat of one game from a seed (so random agents are reproducible)."""
Player = Union[NetworkPlayer, AgentFactory]

BUILTIN_OPPONENTS: dict[str, AgentFactory] = {
    "rule-based": lambda seed: RuleBasedAgent(),
    "random": RandomAgent,
}


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK64
    return value ^ (value >> 31)


def deal_seed(seed: int, deal: int) -> int:
    """The engine seed of deal `deal` (0, 1, 2, ...) of an evaluation with `seed`.

    splitmix64(splitmix64(seed xor "eval") + deal), halved to fit a signed 64-bit integer. Fixed
    forever: changing it would change every deal, and evaluations could no longer be compared.
    """
    return _splitmix64((_splitmix64((seed ^ EVAL_SEED_SALT) & MASK64) + deal) & MASK64) >> 1


def seat_seed(seed: int, deal: int, rotation: int, seat: int) -> int:
    """Seed of one seat's agent in one game (random opponents differ per seat and game)."""
    return _splitmix64((deal_seed(seed, deal) + rotation * SEATS + seat) & MASK64) >> 1


def choose_action_id(logits: np.ndarray, mask: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """The legal action with the largest logit (temperature 0), or one sampled from the softmax
    of the legal logits divided by the temperature."""
    legal = np.flatnonzero(mask)
    legal_logits = logits[legal].astype(np.float64)
    if temperature == 0.0:
        return int(legal[np.argmax(legal_logits)])
    scaled = (legal_logits - legal_logits.max()) / temperature
    probabilities = np.exp(scaled)
    probabilities /= probabilities.sum()
    return int(legal[rng.choice(len(legal), p=probabilities)])


@dataclass(frozen=True)
class DealResult:
    """The evaluated player's result in each rotation of one deal (index r: it sat in seat r)."""

    deal: int
    seed: int
    ranks: tuple[int, ...]
    score_deltas: tuple[int, ...]
    decisions: int
    """Decisions that went through a network in the deal's four games (all network seats)."""


@dataclass
class PoolTimes:
    """Where the pool's time went (seconds) and how much it did."""

    engine_s: float = 0.0
    """The engine (reset, step) and the non-network agents."""
    encode_s: float = 0.0
    """Observations to feature and mask arrays, and picking the action from the logits."""
    network_s: float = 0.0
    """Inside the `logits` calls: copies to the device, the forward pass, the copy back."""
    forward_calls: int = 0
    decisions: int = 0
    games: int = 0


@dataclass
class _Game:
    deal: int
    rotation: int
    env: RiichiEnv
    players: list[Agent | NetworkPlayer]
    rng: np.random.Generator
    start_scores: list[int]
    observations: dict[int, Observation] = field(default_factory=dict)
    decisions: int = 0


@dataclass
class _DealTally:
    ranks: dict[int, int] = field(default_factory=dict)
    score_deltas: dict[int, int] = field(default_factory=dict)
    decisions: int = 0


class DuplicatePool:
    """Plays the four rotations of each deal, `pool_size` games at a time, in lockstep."""

    def __init__(self, evaluated: Player, opponent: Player, *, seed: int, temperature: float = 0.0,
                 pool_size: int = 64, on_game: Callable[[], None] | None = None) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.evaluated = evaluated
        self.opponent = opponent
        self.seed = seed
        self.temperature = temperature
        self.pool_size = pool_size
        self.on_game = on_game
        self.times = PoolTimes()

    def _player(self, player: Player, deal: int, rotation: int, seat: int) -> Agent | NetworkPlayer:
        if isinstance(player, NetworkPlayer):
            return player
        return player(seat_seed(self.seed, deal, rotation, seat))

    def _start(self, deal: int, rotation: int) -> _Game:
        players = [self._player(self.evaluated if seat == rotation else self.opponent, deal, rotation, seat)
                   for seat in range(SEATS)]
        env = new_env(deal_seed(self.seed, deal))
        game = _Game(deal=deal, rotation=rotation, env=env, players=players,
                     rng=np.random.default_rng([self.seed, deal, rotation]), start_scores=[])
        game.observations = env.reset()
        game.start_scores = list(env.scores())
        return game

    def play(self, deals: Sequence[int]) -> Iterator[DealResult]:
        """Play every rotation of `deals`; yield each deal when its four games are over."""
        queue = deque((deal, rotation) for deal in deals for rotation in range(ROTATIONS))
        active: list[_Game] = []
        tallies: dict[int, _DealTally] = {}
        while queue or active:
            started = time.perf_counter()
            while queue and len(active) < self.pool_size:
                active.append(self._start(*queue.popleft()))
            self.times.engine_s += time.perf_counter() - started
            self._step(active)
            still_running = []
            for game in active:
                if not game.env.done():
                    still_running.append(game)
                    continue
                result = self._finish(game, tallies)
                if result is not None:
                    yield result
            active = still_running

    def _step(self, active: list[_Game]) -> None:
        """Decide every pending choice of every active game, then advance each game one step."""
        started = time.perf_counter()
        chosen: list[dict[int, Action]] = [{} for _ in active]
        requests: dict[NetworkPlayer, list[tuple[int, int, Observation]]] = {}
        for index, game in enumerate(active):
            for seat, observation in game.observations.items():
                player = game.players[seat]
                legal = observation.legal_actions()
                if len(legal) == 1:
                    chosen[index][seat] = legal[0]
                elif isinstance(player, NetworkPlayer):
                    requests.setdefault(player, []).append((index, seat, observation))
                else:
                    chosen[index][seat] = player.act(observation)
        self.times.engine_s += time.perf_counter() - started
        for player, pending in requests.items():
            self._decide(player, pending, active, chosen)
        started = time.perf_counter()
        for index, game in enumerate(active):
            game.observations = game.env.step(chosen[index])
        self.times.engine_s += time.perf_counter() - started

    def _decide(self, player: NetworkPlayer, pending: list[tuple[int, int, Observation]],
                active: list[_Game], chosen: list[dict[int, Action]]) -> None:
        """One network call for every pending decision of `player` in this step."""
        started = time.perf_counter()
        features = np.stack([encode_features(observation) for _, _, observation in pending])
        masks = np.stack([encode_mask(observation) for _, _, observation in pending])
        before_network = time.perf_counter()
        logits = np.asarray(player.logits(features, masks))
        after_network = time.perf_counter()
        for (index, seat, observation), row, mask in zip(pending, logits, masks, strict=True):
            game = active[index]
            action = observation.find_action(choose_action_id(row, mask, self.temperature, game.rng))
            if action is None:  # the mask and the legal actions disagree: an engine or encoding bug
                raise RuntimeError(f"deal {game.deal} rotation {game.rotation} seat {seat}: "
                                   "the chosen action id is not a legal action")
            chosen[index][seat] = action
            game.decisions += 1
        self.times.network_s += after_network - before_network
        self.times.encode_s += (before_network - started) + (time.perf_counter() - after_network)
        self.times.forward_calls += 1
        self.times.decisions += len(pending)

    def _finish(self, game: _Game, tallies: dict[int, _DealTally]) -> DealResult | None:
        """Record one finished game; the deal's result once all four rotations are in."""
        seat = game.rotation
        tally = tallies.setdefault(game.deal, _DealTally())
        tally.ranks[game.rotation] = int(game.env.ranks()[seat])
        tally.score_deltas[game.rotation] = int(game.env.scores()[seat]) - game.start_scores[seat]
        tally.decisions += game.decisions
        self.times.games += 1
        if self.on_game is not None:
            self.on_game()
        if len(tally.ranks) < ROTATIONS:
            return None
        del tallies[game.deal]
        return DealResult(
            deal=game.deal, seed=deal_seed(self.seed, game.deal),
            ranks=tuple(tally.ranks[r] for r in range(ROTATIONS)),
            score_deltas=tuple(tally.score_deltas[r] for r in range(ROTATIONS)),
            decisions=tally.decisions)
