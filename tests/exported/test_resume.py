"""`train --exported ... --resume` follows the torch trainer's rule (`trainspeed.train.resume_rule`):
- a run folder says which trainer wrote it, and the other refuses it in one line, leaving every row,
  `train_config.json` and `summary.json` as they were (a torch trainer's `--resume` would see no
  checkpoint it reads, start from step 0 and drop the run's rows);
- a finished run has nothing to do, and its summary is not rewritten;
- the settings that shape the trajectory (`--lr`, `--lr-scaling`, `--warmup-steps`, `--data`, ...)
  are compared on every resume and a change is refused in one line; a longer `--steps` goes on, and
  the run records it;
- a run that never checkpointed starts again from step 0 without its old rows, so no step is
  logged twice, and a resumed diverged run has one summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from exported_runs import copy_of, rows, snapshot, train_args

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.e2e,  # the session's self-play data and torch run are made by child processes
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]


@pytest.mark.parametrize("target", ["cpu:eager:fp32", "jax:jit:fp32"])
def test_the_torch_trainer_refuses_to_resume_a_run_of_exported_steps_and_changes_nothing(
        finished_run: Path, selfplay_data: Path, tmp_path: Path, cli_error, target: str) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    before = snapshot(run)
    error = cli_error("train", "--workload", "mahjong", "--size", "tiny", "--target", target, "--data",
                      str(selfplay_data), "--batch-size-per-device", "8", "--steps", "30", "--threads", "1",
                      "--no-progress", "--resume", "--out", str(run))
    assert "holds a run of `trainspeed train --exported`" in error and "--exported DIR --resume" in error, error
    assert snapshot(run) == before


def test_a_run_of_exported_steps_refuses_to_resume_a_torch_run_and_changes_nothing(
        small_export: Path, selfplay_data: Path, tiny_run: Path, tmp_path: Path, cli_error) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = snapshot(run)
    error = cli_error(*train_args(small_export, selfplay_data, run, "--resume", steps=30))
    assert "holds a run of `trainspeed train`, whose checkpoints `trainspeed train --exported` cannot read" in error
    assert snapshot(run) == before


def test_a_finished_run_has_nothing_to_do_and_keeps_its_summary(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    before = snapshot(run)
    assert main([*train_args(small_export, selfplay_data, run), "--resume"]) == 0
    assert "already finished step 20 of 20; nothing to do (give a larger --steps to train on)" in capsys.readouterr().out
    assert snapshot(run) == before


@pytest.mark.parametrize("flags, says", [
    (["--lr", "1e-3"], "lr.base_lr None -> 0.001"),
    (["--lr-scaling", "linear"], "lr.scaling 'sqrt' -> 'linear'"),
    (["--warmup-steps", "3"], "lr.warmup_steps None -> 3"),
    (["--seed", "1"], "another export, batch size or seed (batch 8, seed 0)"),
], ids=["lr", "lr-scaling", "warmup-steps", "seed"])
def test_a_resume_under_other_settings_is_refused_in_one_line_and_changes_nothing(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path, cli_error, flags, says) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    before = snapshot(run)
    error = cli_error(*train_args(small_export, selfplay_data, run, "--resume", *flags, steps=30))
    assert says in error, error
    assert snapshot(run) == before


def test_a_resume_on_other_data_is_refused(small_export: Path, selfplay_data: Path, finished_run: Path,
                                           tmp_path: Path, cli_error) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    elsewhere = tmp_path / "other-data"
    elsewhere.symlink_to(selfplay_data)
    before = snapshot(run)
    error = cli_error(*train_args(small_export, elsewhere, run, "--resume", steps=30))
    assert f"data '{selfplay_data}' -> '{elsewhere}'" in error
    assert snapshot(run) == before


def test_a_longer_run_goes_on_and_records_what_it_changed(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    assert main(train_args(small_export, selfplay_data, run, "--resume", steps=30)) == 0
    (resumed,) = [json.loads(line) for line in (run / "resumes.jsonl").read_text().splitlines()]
    assert (resumed["checkpoint"], resumed["step"], resumed["changed"]) == ("step-000000020.npz", 20, {"steps": [20, 30]})
    assert json.loads((run / "train_config.json").read_text())["steps"] == 30
    assert [row["step"] for row in rows(run, "train")] == [5, 10, 15, 20, 25, 30]
    assert len(rows(run, "train-summary")) == 1


def test_a_run_killed_before_its_first_checkpoint_starts_over_without_its_rows(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """What a kill -9 at step 10, before the checkpoint was written, leaves: the rows of 10 steps."""
    run = copy_of(finished_run, tmp_path / "run")
    shutil.rmtree(run / "checkpoints")
    (run / "summary.json").unlink()
    logged = [line for line in (run / "metrics.jsonl").read_text().splitlines()
              if json.loads(line)["kind"] in ("train", "val") and json.loads(line)["step"] <= 10]
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in logged))
    assert main([*train_args(small_export, selfplay_data, run), "--resume"]) == 0
    assert f"no checkpoint under {run}; starting from step 0" in capsys.readouterr().out
    assert [row["step"] for row in rows(run, "train")] == [5, 10, 15, 20]
    assert [row["step"] for row in rows(run, "val")] == [10, 20]


def test_a_resumed_diverged_run_writes_one_summary(small_export: Path, selfplay_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "diverged"
    diverging = ["--lr", "1e6", "--lr-scaling", "none"]
    assert main(train_args(small_export, selfplay_data, run, *diverging)) == 0
    diverged_at = json.loads((run / "summary.json").read_text())["diverged_at_step"]
    assert diverged_at is not None
    assert main([*train_args(small_export, selfplay_data, run, *diverging), "--resume"]) == 0
    (summary,) = rows(run, "train-summary")
    assert summary["diverged_at_step"] == diverged_at
