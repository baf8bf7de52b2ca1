"""The engine adapter: deterministic games, and replaying the mjai log gives the same decisions."""

import pytest

from trainspeed.workloads.mahjong.agents import RandomAgent, RuleBasedAgent
from trainspeed.workloads.mahjong.engine import IllegalLogEvent, play_game, replay_events


def _key(decision):
    obs = decision.observation
    return decision.seat, decision.turn, decision.action.encode(), obs.encode(), obs.mask()


@pytest.fixture(scope="module")
def random_game():
    # random agents call chi/pon often, so competing calls (hidden decisions) occur
    return play_game([RandomAgent(seed) for seed in range(4)], seed=11)


def test_same_seed_same_game(random_game):
    again = play_game([RandomAgent(seed) for seed in range(4)], seed=11)
    assert again.mjai_log == random_game.mjai_log
    assert [_key(d) for d in again.decisions] == [_key(d) for d in random_game.decisions]


def test_other_seed_other_wall():
    first = play_game([RuleBasedAgent() for _ in range(4)], seed=1)
    second = play_game([RuleBasedAgent() for _ in range(4)], seed=2)
    assert first.mjai_log[1] != second.mjai_log[1]  # start_kyoku with the dealt hands


@pytest.mark.parametrize("agents", ["random", "rule"])
def test_replaying_the_log_gives_the_same_decisions(agents, random_game):
    record = random_game if agents == "random" else play_game([RuleBasedAgent() for _ in range(4)], seed=5)
    replayed = list(replay_events(enumerate(record.mjai_log, start=1)))
    assert len(replayed) == len(record.decisions) > 100
    assert [_key(d) for d in replayed] == [_key(d) for d in record.decisions]


def test_only_real_choices_are_recorded(random_game):
    assert all(len(d.observation.legal_actions()) > 1 for d in random_game.decisions)
    assert [d.turn for d in random_game.decisions] == list(range(len(random_game.decisions)))
    assert sorted(random_game.ranks) == [1, 2, 3, 4]


def test_a_call_nobody_could_make_is_rejected_with_its_line(random_game):
    log = list(random_game.mjai_log)
    first_tsumo = next(i for i, e in enumerate(log) if e["type"] == "tsumo")
    actor = log[first_tsumo]["actor"]
    pai = log[first_tsumo]["pai"]
    forged = {"type": "pon", "actor": (actor + 1) % 4, "target": actor, "pai": pai, "consumed": [pai, pai]}
    log.insert(first_tsumo + 1, forged)
    with pytest.raises(IllegalLogEvent) as error:
        list(replay_events(enumerate(log, start=1)))
    assert error.value.line_number == first_tsumo + 2
