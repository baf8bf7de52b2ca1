"""from-mjai: tolerated format variants, and errors that name file and line and leave no shard."""

import copy
import gzip
import json
import re

import pytest

from trainspeed.data.shards import read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.data.mjai_import import import_mjai
from trainspeed.workloads.mahjong.data.mjai_logs import read_games
from trainspeed.workloads.mahjong.data.selfplay import log_path
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA


@pytest.fixture(scope="module")
def game_events(selfplay_run) -> list[dict]:
    out, _ = selfplay_run
    ((_, first), *rest), = read_games(log_path(out, 0))
    return [first] + [event for _, event in rest]


def _write_lines(path, events, newline="\n", bom=""):
    path.write_text(bom + newline.join(json.dumps(e) for e in events) + newline, encoding="utf-8", newline="")
    return path


def _samples(folder) -> int:
    return read_index(folder, MAHJONG_SCHEMA)["samples"]


def test_variants_encode_to_the_same_samples(game_events, tmp_path):
    plain = _write_lines(tmp_path / "plain.jsonl", game_events)
    import_mjai([plain], tmp_path / "plain")
    expected = _samples(tmp_path / "plain")

    crlf = _write_lines(tmp_path / "crlf.log", game_events, newline="\r\n", bom="\ufeff")
    array = tmp_path / "array.json"
    array.write_text(json.dumps(game_events))
    with_passes = []
    for event in game_events:
        with_passes.append(event)
        if event["type"] == "dahai":
            with_passes.append({"type": "none", "actor": (event["actor"] + 1) % 4})
    passes = _write_lines(tmp_path / "passes.mjson", with_passes)
    zipped = tmp_path / "zipped.dat"  # gzip is found by content, not by name
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    for name, path in [("crlf", crlf), ("array", array), ("passes", passes), ("zipped", zipped)]:
        import_mjai([path], tmp_path / name)
        assert _samples(tmp_path / name) == expected, name


def test_two_games_in_one_file_become_two_games(game_events, tmp_path):
    both = _write_lines(tmp_path / "two.jsonl", game_events + game_events)
    result = import_mjai([both], tmp_path / "out")
    assert result.games == 2
    assert read_index(tmp_path / "out", MAHJONG_SCHEMA)["games"] == 2


def test_a_line_that_is_not_json_names_file_and_line(game_events, tmp_path):
    path = _write_lines(tmp_path / "broken.jsonl", game_events)
    lines = path.read_text().splitlines()
    lines[9] = lines[9][:-3]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"broken\.jsonl: line 10: not valid JSON"):
        import_mjai([path], out)
    assert not list(out.glob("shard-*")) and not (out / "index.json").exists()


def test_an_illegal_action_names_file_and_line_and_leaves_no_shard(game_events, tmp_path):
    good = _write_lines(tmp_path / "a_good.jsonl", game_events)
    events = [dict(e) for e in game_events]
    # seat 0's first discard becomes a tile it does not hold
    first_discard = next(i for i, e in enumerate(events) if e["type"] == "dahai" and e["actor"] == 0)
    hand = events[1]["tehais"][0] + [events[first_discard - 1].get("pai")]
    events[first_discard]["pai"] = next(t for t in ("1m", "9p", "E", "C", "5s") if t not in hand)
    bad = _write_lines(tmp_path / "b_bad.jsonl", events)
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=rf"b_bad\.jsonl: line {first_discard + 1}: .* not a legal action"):
        import_mjai([good, bad], out, games_per_shard=1)
    assert list(out.iterdir()) == []


def test_missing_inputs_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        import_mjai([tmp_path / "nope.jsonl"], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no mjai logs"):
        import_mjai([tmp_path / "empty"], tmp_path / "out")
    (tmp_path / "object.json").write_text('{"not": "an event"}\n')
    with pytest.raises(UsageError, match=r"object\.json: line 1: an mjai event"):
        import_mjai([tmp_path / "object.json"], tmp_path / "out")


# --- events written differently by other servers and engines ------------------------------------

@pytest.fixture(scope="module")
def raw_games(selfplay_run) -> list[list[dict]]:
    """The self-play games' events exactly as the engine logged them (not normalised)."""
    out, result = selfplay_run
    return [[json.loads(line) for line in gzip.decompress(log_path(out, game).read_bytes()).decode().splitlines()]
            for game in range(result.games)]


def _shard_hashes(folder) -> list[str]:
    return [shard["sha256"] for shard in read_index(folder, MAHJONG_SCHEMA)["shards"]]


def _import_games(tmp_path, name, games) -> list[str]:
    path = _write_lines(tmp_path / f"{name}.jsonl", [event for game in games for event in game])
    import_mjai([path], tmp_path / name)
    return _shard_hashes(tmp_path / name)


def _hand_ends(game: list[dict]) -> list[tuple[int, list[int] | None]]:
    """(index of each hand's last result event, the scores the next hand starts from)."""
    ends, last_result = [], None
    for index, event in enumerate(game):
        if event["type"] in ("hora", "ryukyoku"):
            last_result = index
        elif event["type"] == "start_kyoku" and last_result is not None:
            ends.append((last_result, event["scores"]))
            last_result = None
    if last_result is not None:
        ends.append((last_result, None))
    return ends


def hands_not_shown_as_null(game: list[dict]) -> list[dict]:
    """A draw that lists null for the hands nobody showed, with tenpai flags and scores."""
    for event in game:
        if event["type"] == "ryukyoku":
            event.update(tehais=[None, ["1m", "2m", "3m"], None, None], tenpais=[False, True, False, False], scores=None)
    return game


def original_mjai_server(game: list[dict]) -> list[dict]:
    """The original mjai server's log: start_game with names and the viewer id, start_kyoku without
    scores (the previous hand's hora or ryukyoku reports them), full hora and ryukyoku results with
    '?' for hidden hands, reach_accepted with deltas and scores, end_game with scores."""
    for index, scores in _hand_ends(game):
        game[index]["scores"] = scores if scores is not None else [25000] * 4
    for event in game:
        kind = event["type"]
        if kind == "start_game":
            event.update(id=0, names=["A", "B", "C", "D"], gametype="tonpu")
        elif kind == "start_kyoku":
            del event["scores"]
        elif kind == "hora":
            ura = event.pop("ura_markers", [])
            event.update(uradora_markers=ura, hora_tehais=["1m"] * 14, yakus=[["reach", 1]], fu=30, fan=1,
                         hora_points=1000)
            event.setdefault("scores", [25000, 25000, 25000, 25000])
        elif kind == "ryukyoku":
            event.update(reason="fanpai", tehais=[["?"] * 13] * 4, tenpais=[False] * 4)
        elif kind == "reach_accepted":
            event.update(deltas=[-1000 if seat == event["actor"] else 0 for seat in range(4)], scores=[24000] * 4)
        elif kind == "end_game":
            event["scores"] = [25000] * 4
    return game


def mortal_annotations(game: list[dict]) -> list[dict]:
    """An engine's own analysis attached to every action (Mortal writes `meta` with q-values)."""
    for event in game:
        if "actor" in event:
            event["meta"] = {"q_values": [0.5, -0.25], "mask_bits": 3, "is_greedy": True, "eval_time_ns": 12345}
    return game


@pytest.fixture(scope="module")
def plain_shard_hashes(raw_games, tmp_path_factory) -> list[str]:
    """The shards of the games as the engine logged them, imported once for every variant."""
    kinds = {event["type"] for game in raw_games for event in game}
    assert {"hora", "ryukyoku", "reach_accepted"} <= kinds, "the fixture games need every result event"
    return _import_games(tmp_path_factory.mktemp("plain"), "plain", raw_games)


@pytest.mark.parametrize("variant", [hands_not_shown_as_null, original_mjai_server, mortal_annotations])
def test_logs_from_other_servers_give_the_same_samples(raw_games, plain_shard_hashes, tmp_path, variant):
    changed = [variant(copy.deepcopy(game)) for game in raw_games]
    assert changed != raw_games
    assert _import_games(tmp_path, variant.__name__, changed) == plain_shard_hashes


def _first(game: list[dict], kind: str, **fields) -> int:
    return next(i for i, e in enumerate(game) if e["type"] == kind and all(e.get(k) == v for k, v in fields.items()))


@pytest.mark.parametrize("damage, fragment", [
    (lambda g: g[_first(g, "tsumo", actor=1)].update(pai="?"), r"tsumo shows hidden tiles \('\?'\): the log is one player's view"),
    (lambda g: g[_first(g, "start_kyoku")]["tehais"].__setitem__(2, ["?"] * 13), "start_kyoku shows hidden tiles"),
    (lambda g: g[_first(g, "dahai")].pop("tsumogiri"), "dahai has no 'tsumogiri'; the samples record whether"),
    (lambda g: [e.pop("scores") for e in g if e["type"] == "start_kyoku"], "start_kyoku has no scores, and no earlier event"),
])
def test_what_would_change_the_samples_is_refused_naming_the_line(raw_games, tmp_path, damage, fragment):
    game = copy.deepcopy(raw_games[0])
    damage(game)
    path = _write_lines(tmp_path / "damaged.jsonl", game)
    with pytest.raises(UsageError, match=rf"damaged\.jsonl: line \d+: {fragment}"):
        import_mjai([path], tmp_path / "out")
    assert not list((tmp_path / "out").glob("shard-*"))


DEEP = "[" * 100_000 + "]" * 100_000
"""Nested past Python's recursion limit: its JSON reader raises RecursionError, not a decode error."""


@pytest.mark.parametrize(
    "log, fragment",
    [
        (DEEP, r"deep\.json: JSON nested too deeply to read"),
        ('{"type": "start_game"}\n{"type": "dahai", "meta": ' + DEEP + "}\n", r"deep\.json: line 2: JSON nested too deeply"),
    ],
    ids=["whole-file", "one-line"],
)
def test_deeply_nested_json_is_one_line_and_keeps_what_out_holds(game_events, tmp_path, cli_error, log, fragment):
    logs = tmp_path / "logs"
    logs.mkdir()
    _write_lines(logs / "a_good.jsonl", game_events)
    (logs / "deep.json").write_text(log)
    out = tmp_path / "out"
    out.mkdir()
    line = cli_error("data", "from-mjai", str(logs), "--out", str(out))
    assert re.search(fragment, line), line
    assert list(out.iterdir()) == [], "a refused import left files in the folder it was given empty"
