"""`trainspeed train --init-from`: a new run that starts from another run's checkpoint, with its
networks and optimizer states and its own batch, learning rate, seed and budget; the checkpoint is
checked as a resume checks one, and one of another workload or size is refused before anything is
built from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from train_runs import TINY_RUN, latest_payload, max_abs_difference

from trainspeed.cli import main
from trainspeed.train.checkpoint import checkpoint_dir, checkpoint_name, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.e2e

TINY_LR = 1e-12
"""A branch's learning rate that leaves its weights where the checkpoint had them (Adam's step is
about the learning rate), so they can be compared with it."""


def checkpoint_payload(run: Path, step: int) -> dict:
    return load_checkpoint(checkpoint_dir(run) / checkpoint_name(step))


def test_a_run_from_another_run_s_checkpoint_takes_its_networks_and_moments_and_keeps_its_own_settings(
        tiny_run: Path, data_args: list[str], tmp_path: Path, cli_error, capsys: pytest.CaptureFixture):
    """The branches train in this process (one rank, no loader workers): what is tested is what they
    take from the checkpoint, not their processes."""
    out = tmp_path / "branch"
    flags = [*data_args, "--steps", "1", "--batch-size-per-device", "64", "--seed", "5", "--lr", str(TINY_LR),
             "--lr-scaling", "none", "--warmup-steps", "0", "--min-lr-ratio", "1", "--noise-scale", "off",
             "--out", str(out)]
    code = main(["train", *TINY_RUN, "--num-workers", "0", "--init-from", str(tiny_run), "--init-step", "3", *flags])
    result = capsys.readouterr()
    assert code == 0, result.err[-2000:]
    base, branch = checkpoint_payload(tiny_run, 3), latest_payload(out)
    assert max_abs_difference(base["trainable"]["networks"]["policy"], branch["trainable"]["networks"]["policy"]) < 1e-9
    base_adam, branch_adam = base["trainable"]["optimizers"]["policy"], branch["trainable"]["optimizers"]["policy"]
    assert all(float(state["step"]) == 4 for state in branch_adam["state"].values())  # the base run's 3, then 1
    assert all(group["lr"] == pytest.approx(TINY_LR) for group in branch_adam["param_groups"])  # its own, not 3's
    assert base_adam["param_groups"][0]["lr"] > 1e-6
    assert branch["global_batch"] == 64 and branch["step"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["init_from"] == {"run_dir": str(tiny_run), "checkpoint": str(checkpoint_dir(tiny_run) / checkpoint_name(3)),
                                    "step": 3, "samples": 96, "global_batch": 32}
    assert f"started from {checkpoint_dir(tiny_run) / checkpoint_name(3)} (step 3, 96 samples" in result.out
    config = json.loads((out / "train_config.json").read_text())
    assert (config["init_from"], config["init_step"]) == (str(tiny_run), 3)
    resumed = cli_error("train", "--workload", "mahjong", "--size", "tiny", "--threads", "1", "--log-every", "2",
                        "--init-from", str(tiny_run), "--init-step", "4", "--resume", *flags)
    assert "cannot resume" in resumed and "init_step 3 -> 4" in resumed  # a branch continues from where it began
    named = main(["train", *TINY_RUN, "--num-workers", "0", *data_args, "--init-from",
                  str(checkpoint_dir(tiny_run) / checkpoint_name(3)), "--steps", "1", "--batch-size-per-device", "64",
                  "--noise-scale", "off", "--out", str(tmp_path / "by-file")])
    assert named == 0, capsys.readouterr().err[-2000:]
    assert json.loads((tmp_path / "by-file" / "summary.json").read_text())["init_from"]["step"] == 3


def test_bad_starting_points_are_one_line_before_anything_is_written(tiny_run: Path, data_args: list[str],
                                                                     tmp_path: Path, cli_error, monkeypatch):
    out = tmp_path / "branch"
    common = ["train", "--workload", "mahjong", "--size", "tiny", *data_args, "--steps", "1", "--out", str(out)]
    cases = [
        (["--init-from", str(tiny_run)], "give the step of its checkpoint (--init-step S)"),
        (["--init-step", "3"], "--init-step is the step of --init-from RUN_DIR's checkpoint; give --init-from too"),
        (["--init-from", str(tiny_run), "--init-step", "9"],
         f"{tiny_run} holds no checkpoint of step 9 (its checkpoints: steps 1, 2, 3, 4, 5, 6); a run keeps one every "
         "K steps with --checkpoint-every K --keep-checkpoints 0"),
        (["--init-from", str(checkpoint_dir(tiny_run) / checkpoint_name(3)), "--init-step", "2"],
         "is the checkpoint of step 3, and --init-step says 2"),
        (["--init-from", str(tmp_path), "--init-step", "1"], f"--init-from {tmp_path} is not a run directory"),
    ]
    for extra, message in cases:
        assert message in cli_error(*common, *extra)
    assert "was written by a run of size 'tiny', and this run trains size 'base'" in cli_error(
        "train", "--workload", "mahjong", "--size", "base", *data_args, "--steps", "1", "--out", str(out),
        "--init-from", str(tiny_run), "--init-step", "3")
    # A checkpoint naming a module of its own is refused by its name, before that module is imported.
    planted = tmp_path / "planted"
    shutil.copytree(tiny_run, planted, ignore=shutil.ignore_patterns("*.lock"))
    payload = checkpoint_payload(tiny_run, 3)
    settings = json.loads(payload["config"])
    payload["config"] = json.dumps({**settings, "workload": "planted_workload:factory"})
    save_checkpoint(planted, 3, payload, keep=0)
    modules = tmp_path / "modules"
    modules.mkdir()
    marker = tmp_path / "imported"
    (modules / "planted_workload.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(modules))
    line = cli_error(*common, "--init-from", str(planted), "--init-step", "3")
    assert "was written by a run of workload 'planted_workload:factory', and this run trains 'mahjong'" in line
    assert not marker.exists() and not out.exists()
