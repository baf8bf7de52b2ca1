"""A study's row of one run, from the run directory as `trainspeed.train.runs` reads it: the
time-to-target study's validations and noise scale up to the crossing, the batch-size study's
validations at equal steps and at the end, and a run the study cannot use said in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.studies.batch_size import study as batch_size
from trainspeed.studies.batch_size.config import BatchSizeConfig
from trainspeed.studies.common import RunSpec, StudyFailed
from trainspeed.studies.time_to_target import study as time_to_target
from trainspeed.studies.time_to_target.config import TimeToTargetConfig
from trainspeed.train.flags import train_command
from trainspeed.train.time_to_target import parse_goal

REPO = Path(__file__).resolve().parents[2]
ONE_RANK = REPO / "docs" / "results" / "time_to_target_one_rank"
"""A committed Mahjong run at global batch 64 to val/accuracy>=0.85: validations every 128 steps,
met at step 640, a noise-scale row every 16 steps."""
SPEC = RunSpec(64, 1.0, 0)


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _recipe(tmp_path: Path) -> time_to_target.StudyRecipe:
    config = TimeToTargetConfig(workload="mahjong", data=str(tmp_path / "data"), until="val/accuracy>=0.85",
                                out=str(tmp_path / "out"), global_batches=(64,), seeds=1,
                                runs_dir=str(tmp_path / "runs"))
    recipe = time_to_target.StudyRecipe(config=config, size="tiny", goal=parse_goal(config.until), base_lr=1e-3,
                                        base_lr_from="given", reference_batch=64, identity={})
    run = time_to_target.run_dir(config, SPEC)
    shutil.copytree(ONE_RANK, run)
    args = train_command(time_to_target.run_config(recipe, SPEC))
    (config.runs / f"{SPEC.name}.command.json").write_text(json.dumps({"command_s": 30.0, "args": args}) + "\n")
    return recipe


def test_a_time_to_target_run_row_counts_the_validations_and_takes_the_noise_scale_up_to_the_crossing(tmp_path):
    recipe = _recipe(tmp_path)
    assert time_to_target.is_done(recipe, SPEC)
    row = time_to_target.run_row("study", recipe, SPEC, "lr sweep")
    noise = [r for r in _metrics(ONE_RANK) if r["kind"] == "noise-scale" and r["step"] <= 640]
    assert row.reached and row.validated_step == 640 and row.validations == 5
    assert (row.b_simple, row.noise_scale_method) == (noise[-1]["b_simple_avg"], noise[-1]["method"])
    assert row.samples is not None and 32768 < row.samples <= 40960 and row.command_s == 30.0


def test_a_time_to_target_run_row_whose_noise_scale_near_the_goal_is_unresolved_holds_its_lower_bound(tmp_path):
    recipe = _recipe(tmp_path)
    metrics = time_to_target.run_dir(recipe.config, SPEC) / "metrics.jsonl"
    rows = _metrics(metrics.parent)
    for row in rows:
        if row["kind"] == "noise-scale":  # as the meter writes it now: the last window unresolved
            unresolved = row["step"] == 640
            row.update(schema_version=2, grad_sq_se=1.0, grad_sq_avg_se=row["grad_sq_avg"] if unresolved else 1.0,
                       resolved=not unresolved, b_simple_lower=1234.0 if unresolved else None,
                       b_simple_avg=None if unresolved else row["b_simple_avg"])
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    row = time_to_target.run_row("study", recipe, SPEC, "lr sweep")
    assert (row.b_simple, row.b_simple_lower, row.noise_scale_method) == (None, 1234.0, "micro-batches")


def test_a_time_to_target_run_with_a_bad_metrics_row_is_one_line(tmp_path):
    recipe = _recipe(tmp_path)
    metrics = time_to_target.run_dir(recipe.config, SPEC) / "metrics.jsonl"
    rows = _metrics(metrics.parent)
    rows[3]["b_simple_avg"] = "large"
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(UsageError, match=f"^{metrics}:4: noise-scale row: field b_simple_avg must be"):
        time_to_target.run_row("study", recipe, SPEC, "lr sweep")


def _batch_size_config(tmp_path: Path) -> BatchSizeConfig:
    """Batches 64 and 320 over 40,960 samples: batch 64 trains 640 steps, compared at 128."""
    config = BatchSizeConfig(data=str(tmp_path / "data"), out=str(tmp_path / "out"), batches=(64, 320),
                             samples=40960, runs_dir=str(tmp_path / "runs"))
    shutil.copytree(ONE_RANK, batch_size.run_dir(config, SPEC))
    return config


def test_a_batch_size_run_row_reads_the_validations_at_equal_steps_and_at_the_end(tmp_path):
    config = _batch_size_config(tmp_path)
    assert batch_size.is_trained(config, SPEC)
    row = batch_size.run_row("study", config, SPEC)
    validations = {r["step"]: r for r in _metrics(ONE_RANK) if r["kind"] == "val"}
    assert (row.val_accuracy, row.equal_steps_val_accuracy) == (validations[640]["accuracy"],
                                                                validations[128]["accuracy"])
    assert [point[0] for point in row.curve] == [64 * step for step in (128, 256, 384, 512, 640)]


def test_a_batch_size_run_without_its_validations_fails_saying_so(tmp_path):
    config = _batch_size_config(tmp_path)
    (batch_size.run_dir(config, SPEC) / "metrics.jsonl").unlink()
    with pytest.raises(StudyFailed, match="has no validation at step 128"):
        batch_size.run_row("study", config, SPEC)
