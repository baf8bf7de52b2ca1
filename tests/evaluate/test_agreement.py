"""`trainspeed eval mahjong-agreement` as a user runs it: the row adds up, bad input is one line."""

from __future__ import annotations

import json

import pytest

from trainspeed.cli import main
from trainspeed.workloads.mahjong.data.verify import summarize_mahjong_shards
from trainspeed.workloads.mahjong.decisions import DECISION_KINDS, DISCARD_ERRORS

pytestmark = pytest.mark.e2e


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["eval", "mahjong-agreement", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_decision_of_the_split_is_counted_once_by_kind_and_error(capsys, tiny_run, selfplay_data, tmp_path):
    out = tmp_path / "agreement.jsonl"
    code, printed, err = _run(capsys, "--policy", str(tiny_run), "--data", str(selfplay_data), "--split", "train",
                              "--batch-size", "100", "--out", str(out))
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["kind"] == "mahjong-agreement" and row["split"] == "train" and row["policy_step"] == 6
    summary = summarize_mahjong_shards(selfplay_data)
    assert row["samples"] == sum(row["samples_per_kind"].values()) > 0
    assert row["samples"] <= summary.samples
    assert set(row["samples_per_kind"]) == set(DECISION_KINDS) and set(row["discard_errors"]) == set(DISCARD_ERRORS)
    for kind, chosen in row["chosen_kinds"].items():
        assert sum(chosen.values()) == row["samples_per_kind"][kind]
    building = row["samples_per_kind"]["discard"] - row["folding_samples"]
    wrong_building = round((1 - row["agreement"]["discard_building"]) * building)
    assert sum(row["discard_errors"].values()) == wrong_building
    assert 0.0 <= row["agreement"]["overall"] <= 1.0
    assert f"on {row['samples']} train decisions" in printed


def test_bad_input_is_one_line_and_exit_code_2(capsys, tiny_run, foreign_run, selfplay_data, tmp_path):
    out = tmp_path / "agreement.jsonl"
    cases = [
        (["--policy", str(tiny_run), "--data", str(tmp_path / "missing")], "no such folder"),
        (["--policy", str(foreign_run), "--data", str(selfplay_data)], "its checkpoint is a 'stylegan3' run"),
        (["--policy", str(tiny_run), "--data", str(selfplay_data), "--split", "test"], "choose train or val"),
        (["--policy", str(tiny_run), "--data", str(tiny_run)], "index.json"),
    ]
    for argv, fragment in cases:
        code, _, err = _run(capsys, *argv, "--out", str(out))
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: ") and fragment in lines[0], err
    assert not out.exists()
