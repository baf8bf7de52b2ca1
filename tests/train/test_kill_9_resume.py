"""`kill -9` of a data-parallel training, then `--resume`: it ends with the parameters of a run
never interrupted, on each target family this machine runs and on both workloads' real data.

The XLA case trains the tests' toy workload with AdamW (`toy_workload:with_adamw`) on a shard set
of its own: what XLA adds to a resume (optimizer moments and step counts living on the device,
the loader's position beside them) is the same for any network, while Mahjong's network costs
about 45 CPU-seconds of XLA compilation per process on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from child_commands import TESTS, start_child
from train_runs import (
    PER_DEVICE,
    STEPS,
    TINY_RUN,
    all_networks,
    run_train,
    stylegan3_args,
    train_command,
    train_env,
    wait_for_checkpoint,
)

from trainspeed.cli import main
from trainspeed.targets import available_targets

pytestmark = [pytest.mark.e2e, pytest.mark.long]

XLA_MISSING = available_targets()["xla:lazy:fp32"]


@pytest.fixture(scope="module")
def toy_data_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from toy_workload import write_toy_data

    return ["--workload", "toy_workload:with_adamw", "--data", str(write_toy_data(tmp_path_factory.mktemp("toy") / "data"))]


def _workload_args(workload: str, data_args: list[str], image_data_args: list[str]) -> list[str]:
    """Real data for each workload: Mahjong self-play shards, StyleGAN3 images of `data images`, the
    toy's shards."""
    if workload == "mahjong":
        return [*data_args, "--batch-size-per-device", str(PER_DEVICE), "--steps", str(STEPS)]
    if workload == "toy":
        return [*data_args, "--batch-size-per-device", "8", "--steps", str(STEPS)]
    return stylegan3_args(image_data_args)


KILL_9_CASES = [
    pytest.param("mahjong", "cpu:eager:fp32", 0, id="mahjong-shards-cpu-no-loader-workers"),
    pytest.param("toy", "xla:lazy:fp32", 1, id="toy-adamw-shards-xla",
                 marks=pytest.mark.skipif(XLA_MISSING is not None, reason=str(XLA_MISSING))),
    pytest.param("stylegan3", "cpu:eager:fp32", 1, id="stylegan3-images-cpu-one-loader-worker"),
]
"""(workload, target, loader workers per rank): one target of every family that runs on this
machine's CPU (XLA through its PJRT CPU client, on the toy's shards: the module's docstring says
why), both workloads on their real data, and a loader
without workers (the data position kept in the rank) and with them (kept in each worker)."""


def _resumed(args: list[str], killed: Path, target: str, capfd: pytest.CaptureFixture) -> str:
    """`train ARGS --resume` of the killed run; its output. On the CPU the command runs in this
    process (its ranks are its children): what is tested is what the checkpoint carries through the
    kill, not the command's own process. XLA's stays a child: one process drives both its devices
    (SPMD), which this process cannot, its XLA runtime already started with one."""
    if target.startswith("xla:"):
        resumed = run_train(*args, "--out", str(killed), "--resume", timeout=300, extra_pythonpath=str(TESTS))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        return resumed.stdout
    capfd.readouterr()
    code = main(["train", *TINY_RUN, *args, "--out", str(killed), "--resume"])
    output = capfd.readouterr()
    assert code == 0, output.out[-3000:] + output.err[-3000:]
    return output.out


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "target", "workers"), KILL_9_CASES)
def test_kill_9_then_resume_on_real_data_ends_with_the_parameters_of_an_uninterrupted_run(
    workload: str, target: str, workers: int, request: pytest.FixtureRequest, tmp_path: Path,
    data_args: list[str], image_data_args: list[str], capfd: pytest.CaptureFixture,
) -> None:
    if workload == "toy":
        data_args = request.getfixturevalue("toy_data_args")
    args = [*_workload_args(workload, data_args, image_data_args), "--target", target, "--nproc", "2",
            "--num-workers", str(workers), "--checkpoint-every", "4"]
    if workload == "stylegan3":
        # trained with these flags (tests/train/conftest.py), shared with test_stylegan3.py
        uninterrupted = request.getfixturevalue("stylegan3_two_rank_run")
    elif workload == "mahjong":
        uninterrupted = request.getfixturevalue("two_rank_run")
    else:
        uninterrupted = tmp_path / "uninterrupted"
        result = run_train(*args, "--out", str(uninterrupted), extra_pythonpath=str(TESTS))
        assert result.returncode == 0, result.stdout + result.stderr
    killed = tmp_path / "killed"
    process = start_child(
        train_command(*args, "--out", str(killed)), env=train_env(str(TESTS)), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for_checkpoint(killed, process, timeout_s=180)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not (killed / "summary.json").exists(), "the run finished before it was killed"

    assert "resumed from" in _resumed(args, killed, target, capfd)
    summary = json.loads((killed / "summary.json").read_text())
    assert 0 < summary["first_step"] < summary["last_step"]
    finished, reference = all_networks(killed), all_networks(uninterrupted)
    differing = [name for name in reference if not torch.equal(finished[name], reference[name])]
    assert differing == [], f"{len(differing)} of {len(reference)} tensors differ, e.g. {differing[:3]}"
    logged = [json.loads(line) for line in (killed / "metrics.jsonl").read_text().splitlines()]
    train_steps = [row["step"] for row in logged if row["kind"] == "train"]
    assert train_steps == sorted(set(train_steps)), "a step the killed run logged after its checkpoint is logged twice"
