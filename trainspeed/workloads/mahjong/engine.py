"""The riichienv adapter: play a game with given agents, or replay an mjai log, as decisions.

Both paths yield the same `Decision`s for the same game, so training data made during self-play
equals data made later from the game's mjai log. Two rules make that possible:

- A decision with a single legal action carries no choice, so it is never recorded.
- The log only shows calls that happened. When several players may answer a discard and one calls
  (pon, chi, kan, ron), the others' choices are invisible in the log (a pass and an overridden chi
  look the same), so those decisions are dropped in both paths; only the callers' are kept. When
  nobody calls, every answering player passed, and those passes are kept.

Known gap: under Tenhou rules three rons on one tile abort the hand; the log then shows a draw, so
replay reads those three choices as passes while self-play recorded the rons. That needs three
players waiting on the same tile at once and was never seen in the games tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol, Sequence

from riichienv import Action, ActionType, GameRule, Observation, RiichiEnv

GAME_MODE = "4p-red-half"
SEATS = 4
CALL_EVENTS = frozenset({"chi", "pon", "daiminkan", "hora"})
"""Events by which a player answers another player's tile (or kan) instead of passing."""
FOLLOW_UP_EVENTS = frozenset({"tsumo", "chi", "pon", "reach"})
"""Events after which their own actor decides next (the engine also answers other events, stale)."""
INFO_EVENTS = frozenset({"dora", "reach_accepted"})
"""Events that announce a consequence and answer no pending decision."""
TRIGGER_EVENTS = frozenset({"dahai", "kakan", "ankan"})
"""Events that other players may answer (a discard, or a kan that can be robbed)."""


class Agent(Protocol):
    def act(self, observation: Observation) -> Action: ...


class IllegalLogEvent(ValueError):
    """An mjai event that the engine cannot apply or that no legal action matches."""

    def __init__(self, line_number: int, message: str) -> None:
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


@dataclass(frozen=True)
class Decision:
    """One recorded choice: what `seat` saw and what it did; `turn` counts decisions in the game."""

    seat: int
    turn: int
    observation: Observation
    action: Action


@dataclass
class GameRecord:
    seed: int
    mjai_log: list[dict]
    decisions: list[Decision] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    scores: list[int] = field(default_factory=list)


def new_env(seed: int | None = None) -> RiichiEnv:
    """A hanchan with red fives under Tenhou rules; mjai logging stays on (encodings depend on it)."""
    return RiichiEnv(game_mode=GAME_MODE, seed=seed, rule=GameRule.default_tenhou())


def is_choice(observation: Observation) -> bool:
    return len(observation.legal_actions()) > 1


def _callers_after_last_trigger(log: Sequence[dict]) -> set[int]:
    """Players whose call or win follows the log's last answerable event (several for a double ron)."""
    trigger = max(i for i, event in enumerate(log) if event.get("type") in TRIGGER_EVENTS)
    callers: set[int] = set()
    for event in log[trigger + 1:]:
        if event.get("type") not in CALL_EVENTS:
            break
        callers.add(int(event["actor"]))
    return callers


def _is_response(action: Action) -> bool:
    return action.action_type in (ActionType.PASS, ActionType.CHI, ActionType.PON,
                                  ActionType.DAIMINKAN, ActionType.RON)


def _hidden_seats(chosen: dict[int, Action], env: RiichiEnv) -> set[int]:
    """Answering seats whose choice the log cannot show, because another seat's call took the tile."""
    responders = {seat for seat, action in chosen.items() if _is_response(action)}
    calling = {seat for seat in responders if chosen[seat].action_type != ActionType.PASS}
    if len(responders) < 2 or not calling:
        return set()
    if len(calling) == 1:
        return responders - calling
    # Several calls compete (rare): read who won from the log. It is costly to read
    # (the engine converts the whole log), so only this case does.
    return responders - _callers_after_last_trigger(env.mjai_log)


def play_game(agents: Sequence[Agent], seed: int) -> GameRecord:
    """Play one full game; `agents[seat]` decides for that seat. Deterministic for a seed."""
    if len(agents) != SEATS:
        raise ValueError(f"need {SEATS} agents, got {len(agents)}")
    env = new_env(seed)
    record = GameRecord(seed=seed, mjai_log=[])
    observations = env.reset()
    turn = 0
    while not env.done():
        chosen = {seat: agents[seat].act(obs) for seat, obs in observations.items()}
        next_observations = env.step(chosen)
        hidden = _hidden_seats(chosen, env)
        for seat in sorted(observations):
            if is_choice(observations[seat]) and seat not in hidden:
                record.decisions.append(Decision(seat, turn, observations[seat], chosen[seat]))
                turn += 1
        observations = next_observations
    record.mjai_log = list(env.mjai_log)
    record.ranks = list(env.ranks())
    record.scores = list(env.scores())
    return record


def _action_for(observation: Observation, event: dict, line_number: int) -> Action:
    action = observation.select_action_from_mjai(event)
    if action is None:
        raise IllegalLogEvent(line_number, f"{event.get('type')!r} by seat {event.get('actor')} "
                                           "is not a legal action in that position")
    return action


def _can_pass(observation: Observation) -> bool:
    return any(a.action_type == ActionType.PASS for a in observation.legal_actions())


def _answers(pending: dict[int, Observation], events: Sequence[tuple[int, dict]],
             start: int) -> dict[int, tuple[int, dict]]:
    """Which pending seats act through the events from `start` on, and by which (line, event)."""
    line_number, event = events[start]
    if event.get("type") in CALL_EVENTS:
        answers = {}
        for line, ev in events[start:]:
            if ev.get("type") not in CALL_EVENTS:
                break
            answers[int(ev["actor"])] = (line, ev)
        return answers
    actor = event.get("actor")
    if actor in pending and (not _can_pass(pending[actor])
                             or pending[actor].select_action_from_mjai(event) is not None):
        return {actor: (line_number, event)}
    return {}


def _resolve(pending: dict[int, Observation], events: Sequence[tuple[int, dict]],
             start: int) -> list[tuple[int, Action]]:
    """What each pending seat did, judged from the log's events from `start` on."""
    answers = _answers(pending, events, start)
    line_number, event = events[start]
    decisions = []
    for seat, obs in sorted(pending.items()):
        if seat in answers:
            answer_line, answer = answers[seat]
            decisions.append((seat, _action_for(obs, answer, answer_line)))
        elif not _can_pass(obs):
            raise IllegalLogEvent(line_number, f"seat {seat} had to act, but the log goes on with "
                                               f"{event.get('type')!r}")
        elif not answers:
            decisions.append((seat, _action_for(obs, {"type": "none", "actor": seat}, line_number)))
    for seat, (answer_line, answer) in answers.items():
        if seat not in pending:
            raise IllegalLogEvent(answer_line, f"{answer.get('type')!r} by seat {seat}, who could not act then")
    return [(seat, action) for seat, action in decisions if is_choice(pending[seat])]


def _observe(envs: list[RiichiEnv], line_number: int, event: dict) -> dict[int, Observation]:
    observed: dict[int, Observation] = {}
    for seat, env in enumerate(envs):
        try:
            obs = env.observe_event(event, seat)
        except Exception as error:  # the engine raises plain exceptions for events it rejects
            raise IllegalLogEvent(line_number, f"the engine rejects {event.get('type')!r}: {error}") from None
        is_stale = seat == event.get("actor") and event.get("type") not in FOLLOW_UP_EVENTS
        if obs is not None and obs.legal_actions() and not is_stale:
            observed[seat] = obs
    return observed


def replay_events(events: Iterable[tuple[int, dict]]) -> Iterator[Decision]:
    """Decisions of one logged game, from its (line number, mjai event) pairs in log order.

    One engine per seat follows the log from that seat's view (the engine's online API), so the
    observations and legal actions are exactly those the engine gives in self-play.
    """
    envs = [new_env() for _ in range(SEATS)]
    logged = list(events)
    pending: dict[int, Observation] = {}
    turn = 0
    for index, (line_number, event) in enumerate(logged):
        if event.get("type") in INFO_EVENTS:
            _observe(envs, line_number, event)
            continue
        if pending:
            for seat, action in _resolve(pending, logged, index):
                yield Decision(seat, turn, pending[seat], action)
                turn += 1
        pending = _observe(envs, line_number, event)
