"""from-mjai: tolerated format variants, and errors that name file and line and leave no shard."""

import gzip
import json

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
