"""`trainspeed data mahjong-selfplay | from-mjai | inspect | verify` through the real CLI."""

import json
import shutil

from trainspeed.cli import main


def test_selfplay_inspect_verify_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "games"
    code = main(["data", "mahjong-selfplay", "--games", "1", "--workers", "1", "--out", str(out),
                 "--seed", "3", "--no-progress"])
    assert code == 0
    assert "1 games" in capsys.readouterr().out
    assert main(["data", "inspect", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["games"] == 1 and summary["bytes_per_sample"] == 5938
    assert main(["data", "verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out

    assert main(["data", "from-mjai", str(out / "mjai"), "--out", str(tmp_path / "imported")]) == 0
    capsys.readouterr()
    assert main(["data", "inspect", str(tmp_path / "imported"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == summary["samples"]


def test_verify_exit_code_and_message_name_the_damaged_shard(mahjong_shards, tmp_path, capsys):
    folder = tmp_path / "copy"
    shutil.copytree(mahjong_shards, folder)
    shard = sorted(folder.glob("shard-*.bin"))[0]
    with open(shard, "r+b") as handle:
        handle.truncate(1000)
    assert main(["data", "verify", str(folder)]) == 1
    assert f"FAIL {shard}" in capsys.readouterr().out


def test_bad_input_is_one_error_line_and_exit_code_2(tmp_path, capsys):
    assert main(["data", "inspect", str(tmp_path / "missing")]) == 2
    assert "trainspeed: error:" in capsys.readouterr().err
    assert main(["data", "from-mjai", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_an_unwritable_out_is_refused_before_any_game_is_played(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    log = tmp_path / "game.jsonl"
    log.write_text('{"type": "start_game"}\n')
    for command in (["mahjong-selfplay", "--games", "1", "--no-progress"], ["from-mjai", str(log)]):
        assert main(["data", *command, "--out", str(blocker / "out")]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("trainspeed: error: cannot write to --out"), line


def test_vocab_with_a_mahjong_shard_set_is_refused(mahjong_shards, capsys):
    assert main(["data", "verify", str(mahjong_shards), "--vocab", "100"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("shard set, which holds no token ids; drop --vocab"), line
