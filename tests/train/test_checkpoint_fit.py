"""Checkpoints that pass their sha256 check and load as plain data but do not fit their run: a step
other than their name's, networks of another shape, a broken RNG state, scalars of the wrong type,
settings nested too deeply. `train --resume` and `eval` refuse each in one line, before anything in
the run directory moves; a resume over checkpoints never trains from step 0.

Also the resume plan: the launcher decides once, and the ranks load the checkpoint it names."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from train_runs import TINY_RUN
from trainspeed.cli import main
from trainspeed.train.checkpoint import load_checkpoint

RUN = ["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--log-every", "1",
       "--checkpoint-every", "3", "--num-workers", "0"]
STEP_3, STEP_6 = "step-000000003.pt", "step-000000006.pt"


@pytest.fixture(scope="module")
def six_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fit") / "run"
    assert main([*RUN, "--steps", "6", "--out", str(out)]) == 0
    return out


@pytest.fixture
def run_dir(six_steps: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(six_steps, copy)
    return copy


def rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the checkpoint's payload and write it back with a matching checksum, as a tamperer
    (or a buggy tool) would: only the checks of its contents stand between it and the run."""
    payload = load_checkpoint(path)
    change(payload)
    torch.save(payload, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")


def _policy(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    return payload["trainable"]["networks"]["policy"]


def _first_key(payload: dict[str, Any]) -> str:
    return next(iter(_policy(payload)))


def _config(payload: dict[str, Any]) -> dict[str, Any]:
    return json.loads(payload["config"])


CHANGES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "step-below-its-name": (lambda p: p.update(step=0), "records step 0, but its name says step 6"),
    "extra-network-key": (lambda p: _policy(p).update({"extra.weight": torch.zeros(2)}), "network 'policy' has extra tensor 'extra.weight'"),
    "missing-network-key": (lambda p: _policy(p).pop(_first_key(p)), "network 'policy' lacks tensor"),
    "wrong-tensor-shape": (lambda p: _policy(p).update({_first_key(p): torch.zeros(3, 3)}), "the model's is"),
    "rng-state-wrong-size": (lambda p: p["ranks"][0]["rng"].update(torch=torch.zeros(7, dtype=torch.uint8)),
                             "has a torch RNG state in rank 0's part that its generator refuses"),
    "string-step": (lambda p: p.update(step="6"), "records step '6', not a whole number"),
    "no-world-size": (lambda p: p.pop("world_size"), "has no 'world_size'"),
    "deeply-nested-config": (lambda p: p.update(config='{"lr": ' + "[" * 100_000 + "]" * 100_000 + "}"),
                             "nested too deeply"),
    "mistyped-setting": (lambda p: p.update(config=json.dumps({**_config(p), "seed": "zero"})),
                         "has settings that cannot be read"),
}


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("change", list(CHANGES))
def test_resume_refuses_a_checkpoint_that_does_not_fit_in_one_line_and_moves_nothing(
    change: str, run_dir: Path, cli_error
) -> None:
    mutate, said = CHANGES[change]
    rewrite(run_dir / "checkpoints" / STEP_6, mutate)
    before = _snapshot(run_dir)
    line = cli_error(*RUN, "--steps", "9", "--out", str(run_dir), "--resume")
    assert line.startswith("trainspeed: error: train: cannot resume: ") and STEP_6 in line and said in line, line
    assert _snapshot(run_dir) == before, "a refused resume changed the run directory"


@pytest.mark.parametrize("change", list(CHANGES))
def test_eval_refuses_a_checkpoint_that_does_not_fit_in_one_line(
    change: str, run_dir: Path, tmp_path: Path, cli_error
) -> None:
    mutate, said = CHANGES[change]
    rewrite(run_dir / "checkpoints" / STEP_6, mutate)
    out = tmp_path / "eval.jsonl"
    line = cli_error("eval", "mahjong", "--policy", str(run_dir), "--games", "4", "--no-progress", "--no-plot",
                     "--out", str(out))
    assert line.startswith(f"trainspeed: error: --policy {run_dir}: ") and said in line, line
    assert not out.exists() and not Path(str(out) + ".progress").exists()


def test_a_step_zero_payload_in_a_later_checkpoint_never_restarts_the_run_or_drops_its_rows(
    run_dir: Path, cli_error
) -> None:
    """The file of step 6 holding step 0's contents once made a resume move steps 6 and 3 aside,
    find `latest` dangling, train from step 0 and rewrite the metrics without the run's rows."""
    rows = (run_dir / "metrics.jsonl").read_text()
    rewrite(run_dir / "checkpoints" / STEP_6, lambda p: p.update(step=0))
    cli_error(*RUN, "--steps", "9", "--out", str(run_dir), "--resume")
    assert (run_dir / "metrics.jsonl").read_text() == rows
    assert not (run_dir / "checkpoints" / "superseded").exists()
    assert {p.name for p in (run_dir / "checkpoints").glob("step-*.pt")} == {STEP_3, STEP_6}


def test_the_ranks_load_the_checkpoint_the_launchers_plan_names(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    """The launcher writes its decision into `resume_plan.json`; a rank continues from the file it
    names, not from whatever `latest` says when the rank starts."""
    (run_dir / "checkpoints" / "latest").write_text(STEP_3 + "\n")
    assert main([*RUN, "--steps", "7", "--out", str(run_dir), "--resume"]) == 0
    out = capsys.readouterr().out
    plan = json.loads((run_dir / "resume_plan.json").read_text())
    assert plan["checkpoint"] == STEP_3 and plan["step"] == 3
    assert plan["set_aside"] == "checkpoints/superseded/1"
    assert f"resumed from {run_dir / 'checkpoints' / STEP_3} at step 3" in out


def test_a_rank_refuses_a_plan_whose_checkpoint_changed_after_the_launcher_checked_it(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    from trainspeed.train.config import TrainConfig
    from trainspeed.train.distributed import Collectives, RankContext
    from trainspeed.train.loop import Layout, RankTrainer
    from trainspeed.targets import get_target
    from trainspeed.errors import UsageError

    assert main([*RUN, "--steps", "7", "--out", str(run_dir), "--resume"]) == 0
    capsys.readouterr()
    plan = json.loads((run_dir / "resume_plan.json").read_text())
    planned = run_dir / "checkpoints" / plan["checkpoint"]
    rewrite(planned, lambda p: p.update(step=1))
    config = TrainConfig.from_json((run_dir / "train_config.json").read_text())
    with pytest.raises(UsageError, match="changed after the launcher checked it"):
        RankTrainer(config, Layout(RankContext()), Collectives(RankContext()), get_target(config.target))
