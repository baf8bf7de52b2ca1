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


def _adam(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["trainable"]["optimizers"]["policy"]


def _rng(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["ranks"][0]["rng"]


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
    "tensor-step": (lambda p: p.update(step=torch.tensor(6)),
                    "records step a tensor of shape [], not a whole number >= 0"),
    "settings-not-text": (lambda p: p.update(config=None), "records its settings as None, not as the JSON text"),
    "settings-a-list": (lambda p: p.update(config="[6]"),
                        "has settings that cannot be read (its settings: not the settings of a training run "
                        "(a JSON list))"),
    "no-trainable": (lambda p: p.pop("trainable"), "has no 'trainable': it is not a checkpoint of `trainspeed train`"),
    "networks-a-list": (lambda p: p["trainable"].update(networks=[]),
                        "holds a list as trainable['networks'], not a dict"),
    "tensor-a-list": (lambda p: _policy(p).update(position=[0.5]),
                      "holds a list as network 'policy' 'position', not a tensor"),
    "optimizer-not-a-state": (lambda p: p["trainable"]["optimizers"].update(policy="adam"),
                              "holds 'adam' as the state of optimizer 'policy', not an optimizer's state"),
    "state-of-a-parameter-it-lacks": (lambda p: _adam(p)["state"].update({999: _adam(p)["state"][0]}),
                                      "has a state of optimizer 'policy' for parameter 999, which the model's 33"),
    "moment-of-another-shape": (lambda p: _adam(p)["state"][0].update(exp_avg=torch.zeros(3, 3)),
                                "optimizer 'policy' keeps 'exp_avg' of parameter 0 as [3, 3], the parameter is "
                                "[1, 34, 64]"),
    "groups-of-another-size": (lambda p: _adam(p)["param_groups"][0].update(params=[0]),
                               "has a state of optimizer 'policy' that does not fit the run's model (ValueError: "),
    "schedule-at-another-step": (lambda p: p["schedulers"]["policy"].update(last_epoch=2),
                                 "has a learning-rate schedule 'policy' at step 2, not at its step 6"),
    "two-rank-parts": (lambda p: p["ranks"].append(p["ranks"][0]), "holds 2 rank parts for 1 ranks"),
    "rank-part-a-string": (lambda p: p["ranks"].__setitem__(0, "rank"), "holds 'rank' as rank 0's part, not a dict"),
    "negative-loader-epoch": (lambda p: p["ranks"][0]["loader"].update(epoch=-1),
                              "records rank 0's part's loader epoch as -1, not a whole number >= 0"),
    "no-python-rng": (lambda p: _rng(p).pop("python"), "has no python RNG state in rank 0's part"),
    "numpy-rng-cut-short": (lambda p: _rng(p)["numpy"].update(key=_rng(p)["numpy"]["key"][:10]),
                            "has a numpy RNG state in rank 0's part that its generator refuses (ValueError: not 624 "
                            "words of MT19937 state)"),
    "device-rng-a-string": (lambda p: _rng(p).update(device="seed"),
                            "holds 'seed' as the device RNG state in rank 0's part (a target keeps a seed or tensors"),
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


def test_a_checkpoint_whose_global_batch_is_not_its_settings_is_refused_before_anything_moves(
    run_dir: Path, cli_error
) -> None:
    """The launcher checks the recorded global batch with the rest, so the ranks need not: a refusal
    comes before the resume is recorded or a row is dropped."""
    rewrite(run_dir / "checkpoints" / STEP_6, lambda p: p.update(global_batch=16))
    before = _snapshot(run_dir)
    line = cli_error(*RUN, "--steps", "9", "--out", str(run_dir), "--resume")
    assert line == (f"trainspeed: error: train: cannot resume {run_dir / 'checkpoints' / STEP_6}: it records global "
                    "batch 16, but the run's settings make 8; restore it, or start a new run in another --out")
    assert _snapshot(run_dir) == before, "a refused resume changed the run directory"


def test_prepare_plans_the_resume_and_restore_loads_it_into_a_ranks_parts(
    run_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """The two faces of `trainspeed.train.resume`: the launcher's `prepare` (with the lock held)
    and each rank's `restore`, which loads what the plan names and continues the run's clock."""
    import dataclasses

    from trainspeed.targets import get_target
    from trainspeed.train.distributed import RankContext
    from trainspeed.train.loop import Layout, open_loader
    from trainspeed.train.lr_schedule import build_schedulers
    from trainspeed.train.resume import RankParts, prepare, restore
    from trainspeed.train.run_dir import RunDirectory
    from trainspeed.workloads import get_workload

    (run_dir / "checkpoints" / "latest").write_text(STEP_3 + "\n")
    config = dataclasses.replace(_run_config(run_dir), steps=9, resume=True)
    with RunDirectory(run_dir).lock():
        plan = prepare(RunDirectory(run_dir), config, processes=1, total_steps=9)
    assert plan is not None and (plan.checkpoint, plan.step, plan.set_aside) == (STEP_3, 3, "checkpoints/superseded/1")

    target, workload = get_target(config.target), get_workload(config.workload)
    trainable = target.build(workload, config.size, config.seed)
    loader = open_loader(workload, config, Layout(RankContext()), target, "train")
    parts = RankParts(rank=0, trainable=trainable, loader=loader, target=target,
                      schedulers=build_schedulers(trainable.optimizers, config.lr, config.global_batch, 9))
    restored = restore(run_dir, parts)
    saved = load_checkpoint(run_dir / "checkpoints" / STEP_3)
    assert restored is not None and (restored.step, restored.epoch) == (3, saved["epoch"])
    assert f"train: resumed from {run_dir / 'checkpoints' / STEP_3} at step 3" in capsys.readouterr().out
    networks = trainable.state_dict()["networks"]["policy"]
    assert all(torch.equal(networks[key].cpu(), tensor) for key, tensor in saved["trainable"]["networks"]["policy"].items())
    assert loader.state_dict() == saved["ranks"][0]["loader"]
    lost = max(0.0, plan.logged_train_s - saved["run_clock"]["train_s"])
    assert restored.totals.resumes == saved["run_clock"]["resumes"] + 1
    assert restored.totals.train_s == saved["run_clock"]["train_s"] + lost and restored.totals.lost_train_s == lost


def _run_config(run_dir: Path):
    from trainspeed.train.config import TrainConfig

    return TrainConfig.from_json((run_dir / "train_config.json").read_text())


def test_a_resume_where_no_checkpoint_was_written_plans_step_zero_and_loads_nothing(tmp_path: Path,
                                                                                    six_steps: Path) -> None:
    from trainspeed.train.resume import ResumePlan, load_planned, plan_resume

    plan = plan_resume(tmp_path, _run_config(six_steps), processes=1)
    assert plan == ResumePlan(step=0, checkpoint=None)
    assert load_planned(tmp_path, plan) is None


def test_a_resume_by_another_number_of_rank_processes_is_refused(run_dir: Path) -> None:
    """The same settings run as one SPMD process instead of one process per rank: the checkpoint
    holds a part per rank process, so it cannot continue there."""
    from trainspeed.errors import UsageError
    from trainspeed.train.resume import plan_resume

    with pytest.raises(UsageError) as refused:
        plan_resume(run_dir, _run_config(run_dir), processes=2)
    assert str(refused.value) == (f"train: cannot resume {run_dir / 'checkpoints' / STEP_6}: it was written by 1 rank "
                                  "processes, this run has 2; resume with the same --nproc/--nnodes and target")


@pytest.mark.parametrize(("plan", "said"), [
    (None, "not the resume plan the launcher writes (FileRefused: "),
    ('{"step": 6}', "not the resume plan the launcher writes (KeyError: 'checkpoint')"),
    ('{"step": 3, "checkpoint": "step-000000006.pt", "changed": {}, "skipped": [], "set_aside": null}',
     "a resume plan of step 3 from 'step-000000006.pt' does not name a checkpoint of that step"),
    ('{"step": "6", "checkpoint": null, "changed": {}, "skipped": [], "set_aside": null}',
     "a resume plan of step '6' from None does not name a checkpoint of that step"),
], ids=["missing", "incomplete", "another-step", "step-a-string"])
def test_a_rank_refuses_a_resume_plan_the_launcher_did_not_write(run_dir: Path, plan: str | None, said: str) -> None:
    from trainspeed.errors import UsageError
    from trainspeed.train.resume import read_plan

    path = run_dir / "resume_plan.json"
    if plan is not None:
        path.write_text(plan)
    with pytest.raises(UsageError) as refused:
        read_plan(run_dir)
    assert str(refused.value).startswith(f"train: {path}: {said}"), refused.value
    assert str(refused.value).endswith("start the resume with `trainspeed train ... --resume`")


def test_resume_never_imports_a_module_the_checkpoint_names(run_dir: Path, tmp_path: Path, monkeypatch, cli_error):
    """A run directory is data: a checkpoint whose settings name a module of someone's (present and
    importable here) is refused before anything imports it, and nothing in the run moves."""
    modules = tmp_path / "modules"
    modules.mkdir()
    marker = tmp_path / "imported"
    (modules / "planted_workload.py").write_text(f"open({str(marker)!r}, 'w').close()\nWorkload = None\n")
    monkeypatch.syspath_prepend(str(modules))
    rewrite(run_dir / "checkpoints" / STEP_6,
            lambda p: p.update(config=json.dumps({**_config(p), "workload": "planted_workload:Workload"})))
    before = _snapshot(run_dir)
    line = cli_error(*RUN, "--steps", "9", "--out", str(run_dir), "--resume")
    assert "was written by a run of workload 'planted_workload:Workload', and this run trains 'mahjong'" in line, line
    assert not marker.exists() and _snapshot(run_dir) == before
