"""The time-to-target study's records beside its runs (`NAME.command.json`: the command's seconds
and arguments): an earlier study's record is never written over, and a file of anyone else's by
that name is never taken for one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.studies.common import RunSpec
from trainspeed.studies.time_to_target.config import TimeToTargetConfig
from trainspeed.studies.time_to_target.study import check_records, set_aside

SPEC = RunSpec(16, 1.0, 0)
EARLIER = json.dumps({"command_s": 12.5, "args": ["train", "--lr", "0.003"]}) + "\n"
"""An earlier study's record of run b16-lr1-s0, made with other arguments than this study's."""


def config_of(tmp_path: Path) -> TimeToTargetConfig:
    return TimeToTargetConfig(workload="mahjong", data=str(tmp_path / "data"), until="val/accuracy>=0.5",
                              out=str(tmp_path / "out"), global_batches=(16, 32), seeds=2,
                              runs_dir=str(tmp_path / "runs"))


def test_a_run_set_aside_keeps_its_record_beside_it(tmp_path: Path) -> None:
    """A run of other settings is trained again; the earlier run and its record are both kept,
    renamed together, so the record of the new run never replaces the earlier one's."""
    config = config_of(tmp_path)
    (config.runs / SPEC.name).mkdir(parents=True)
    (config.runs / SPEC.name / "summary.json").write_text("{}\n")
    (config.runs / f"{SPEC.name}.command.json").write_text(EARLIER)
    (config.runs / f"{SPEC.name}.set-aside-1.command.json").write_text(EARLIER)  # an older one, kept too
    check_records(config)  # an earlier study's record is no user's file
    set_aside(config, SPEC)
    assert sorted(path.name for path in config.runs.iterdir()) == [
        "b16-lr1-s0.set-aside-1.command.json", "b16-lr1-s0.set-aside-2", "b16-lr1-s0.set-aside-2.command.json"]
    assert (config.runs / "b16-lr1-s0.set-aside-2.command.json").read_text() == EARLIER
    assert (config.runs / "b16-lr1-s0.set-aside-2" / "summary.json").read_text() == "{}\n"


def test_a_record_without_its_run_is_set_aside_too(tmp_path: Path) -> None:
    config = config_of(tmp_path)
    config.runs.mkdir()
    (config.runs / f"{SPEC.name}.command.json").write_text(EARLIER)
    set_aside(config, SPEC)
    assert [path.name for path in config.runs.iterdir()] == ["b16-lr1-s0.set-aside-1.command.json"]


def test_a_users_file_named_like_a_record_of_another_batch_or_seed_is_no_concern(tmp_path: Path) -> None:
    """Only the names of runs this study may make are checked: batch 64 and seed 5 are not among them."""
    config = config_of(tmp_path)
    config.runs.mkdir()
    for name in ("b64-lr1-s0.command.json", "b16-lr1-s5.command.json", "notes.command.json"):
        (config.runs / name).write_text("mine\n")
    check_records(config)
    (config.runs / "b32-lr0.25-s1.command.json").write_text("mine\n")
    with pytest.raises(UsageError, match=r"b32-lr0\.25-s1\.command\.json is named like the record of one of its "
                                         r"runs but is not JSON; it is never written over"):
        check_records(config)


def test_a_runs_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    config = config_of(tmp_path)
    Path(config.runs).write_text("mine\n")
    with pytest.raises(UsageError, match="--runs-dir .* is a file; name a folder for the runs"):
        check_records(config)
