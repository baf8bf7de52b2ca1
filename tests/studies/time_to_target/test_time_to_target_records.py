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
from trainspeed.studies.time_to_target.study import StudyRecipe, check_records, recorded_config, run_config, set_aside
from trainspeed.train.time_to_target import parse_goal

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


def test_a_record_of_the_same_run_in_flags_of_another_order_is_the_same_run(tmp_path: Path) -> None:
    """A rerun reuses a run whose record holds its command in any order, defaults spelt out (as the
    study wrote them before its commands came from the run's config); other settings, a record of
    a command train refuses, or none, are another run."""
    config = config_of(tmp_path)
    recipe = StudyRecipe(config=config, size="tiny", goal=parse_goal(config.until), base_lr=1e-3,
                         base_lr_from="workload", reference_batch=16, identity={})
    spelt_out = ["train", "--workload", "mahjong", "--size", "tiny", "--data", config.data, "--target", "cpu:eager:fp32",
                 "--nproc", "1", "--threads", "1", "--num-workers", "1", "--batch-size-per-device", "16", "--steps",
                 "16384", "--seed", "0", "--lr", "0.001", "--lr-scaling", "none", "--warmup-steps", "256",
                 "--min-lr-ratio", "1", "--until", config.until, "--stop-at-target", "--eval-every-samples", "4096",
                 "--log-every", "50", "--checkpoint-every", "0", "--out", str(config.runs / SPEC.name), "--no-progress",
                 "--eval-batches", "128", "--noise-scale-micro-batches", "2", "--noise-scale-every", "1"]
    record = config.runs / f"{SPEC.name}.command.json"
    config.runs.mkdir()
    assert recorded_config(config, SPEC) is None
    record.write_text(json.dumps({"command_s": 12.5, "args": spelt_out}) + "\n")
    assert recorded_config(config, SPEC) == run_config(recipe, SPEC)
    for other in (spelt_out[:-2], ["train", "--help"], ["train", "--no-such-flag"]):
        record.write_text(json.dumps({"command_s": 12.5, "args": other}) + "\n")
        assert recorded_config(config, SPEC) != run_config(recipe, SPEC)
