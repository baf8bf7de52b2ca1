"""Data-parallel training end to end through the CLI: torchrun, DDP, checkpoints, failures.

Tolerance of the 1-rank vs 2-rank comparison: the two runs see the same global batches, but the
gradient of 2 ranks is an average of two half-batch means (summed by the all-reduce) instead of one
full-batch mean: the same numbers added in another order, so the runs differ by rounding alone. In
float32 that difference (1e-6 to 2e-5 after 24 steps, depending on the CPU's vector width) is too
close to a real fault to tell them apart, so the comparison runs a network that computes in float64
from its inputs to its loss (`float64_workload`, on Mahjong's real shards and loader). Rounding
there is relative 2**-53 = 1.1e-16 per operation: float32 runs show differences of about 250 units
of their own rounding (2**-24), which in float64 is 3e-14. ATOL_FLOAT64 = 1e-9 leaves a factor of
3e4 above that on any machine, and is 1e6 below what any fault of the data-parallel arithmetic does
(a sample read by the wrong rank or twice, a rank's gradient missing from the average): it changes
an AdamW update, whose size is the learning rate (3e-3 here), by a fraction of it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import torch
from child_commands import start_child
from train_runs import (
    PER_DEVICE,
    STEPS,
    TINY_RUN,
    ATOL_FLOAT64,
    final_parameters,
    float64_initial_parameters,
    float64_workload,
    max_abs_difference,
    run_train,
    train_command,
    train_env,
    wait_for_checkpoint,
)

from trainspeed.cli import main


pytestmark = [pytest.mark.e2e, pytest.mark.long]

@pytest.mark.slow
def test_two_ranks_end_with_the_parameters_of_one_rank_at_the_same_global_batch(
    tmp_path: Path, data_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = float64_workload(tmp_path)
    runs = {nproc: tmp_path / f"ranks{nproc}" for nproc in (1, 2)}
    command_s = {}
    for nproc, out in runs.items():
        started = time.monotonic()
        result = run_train(*data_args, *workload, "--nproc", str(nproc), "--batch-size-per-device",
                           str(2 * PER_DEVICE // nproc), "--steps", str(STEPS), "--out", str(out),
                           timeout=180, extra_pythonpath=str(tmp_path))
        command_s[nproc] = time.monotonic() - started
        assert result.returncode == 0, result.stdout + result.stderr
    one, two = final_parameters(runs[1]), final_parameters(runs[2])
    assert all(tensor.dtype == torch.float64 for tensor in one.values())
    assert max_abs_difference(one, float64_initial_parameters(tmp_path, monkeypatch)) > 1e6 * ATOL_FLOAT64
    assert max_abs_difference(one, two) <= ATOL_FLOAT64
    summary = json.loads((runs[2] / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_batch"] == 2 * PER_DEVICE
    assert summary["samples"] == STEPS * 2 * PER_DEVICE
    assert 0.0 <= summary["data_wait_fraction"] <= 1.0
    for nproc, out in runs.items():  # the command's start to the first step: inside the command, before its steps
        recorded = json.loads((out / "summary.json").read_text())
        assert 0 < recorded["startup_s"] < command_s[nproc] - recorded["wall_s"]


FAILING_WORKLOAD = '''
import os
import signal

from trainspeed.workloads.mahjong.workload import MahjongWorkload, PolicyTrainable


class FailingTrainable(PolicyTrainable):
    """Rank 1 raises at its third step."""

    steps = 0

    def train_step(self, batch):
        self.steps += 1
        if self.steps == 3 and os.environ.get("RANK") == "1":
            self.fail()
        return super().train_step(batch)

    def fail(self):
        raise RuntimeError("injected failure on rank 1 at step 3")


class KilledTrainable(FailingTrainable):
    """Rank 1 is killed with kill -9 at its third step (the rank process signals itself)."""

    def fail(self):
        os.kill(os.getpid(), signal.SIGKILL)


class FailingWorkload(MahjongWorkload):
    trainable = FailingTrainable

    def build(self, size, seed=0):
        return self.trainable(super().build(size, seed).networks["policy"])


class KilledWorkload(FailingWorkload):
    trainable = KilledTrainable
'''


def _train_two_ranks_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workload: str) -> int:
    """`trainspeed train` of two ranks with one of FAILING_WORKLOAD's workloads, in this process (its
    ranks and their agent are its children, which import the workload from PYTHONPATH); its exit code."""
    (tmp_path / "failing_workload.py").write_text(FAILING_WORKLOAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    return main(["train", *TINY_RUN, "--synthetic-data", "--nproc", "2", "--batch-size-per-device", "8", "--steps",
                 "50", "--out", str(tmp_path / "run"), "--workload", f"failing_workload:{workload}"])


@pytest.mark.slow
def test_a_dying_rank_brings_the_job_down_and_its_error_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    """The command in this process: what is tested is how the ranks' failure comes back, which the
    output of the whole process tree shows (capfd: its file descriptors)."""
    assert _train_two_ranks_failing(tmp_path, monkeypatch, "FailingWorkload") == 1
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: rank 1: RuntimeError: injected failure on rank 1 at step 3"), line
    logs = tmp_path / "run" / "logs"
    assert "Traceback" in "".join(p.read_text() for p in logs.rglob("stderr.log"))


@pytest.mark.slow
def test_a_rank_killed_with_kill_9_is_one_line_and_the_exit_code_of_a_killed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    """Rank 1's process gets SIGKILL in its third step. The command in this process, as above: the
    code `main` returns is the one `trainspeed` exits with (the stop-signal test below checks a
    command process's own exit code)."""
    assert _train_two_ranks_failing(tmp_path, monkeypatch, "KilledWorkload") == 137
    (line,) = capfd.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: rank 1: killed by signal 9 (SIGKILL)"), line


STOPS = [
    pytest.param(2, signal.SIGTERM, False, id="2-ranks-SIGTERM-to-the-launcher"),
    pytest.param(1, signal.SIGINT, True, id="1-rank-Ctrl-C"),
]
"""(ranks, signal, to the whole process group as a terminal's Ctrl-C sends it, or to the launcher
alone): each signal, each way of sending it, one rank and several, in two runs."""


@pytest.mark.parametrize(("nproc", "stop_signal", "to_group"), STOPS)
@pytest.mark.slow
def test_a_stop_signal_checkpoints_at_the_current_step_says_so_in_one_line_and_resume_finishes(
    nproc: int, stop_signal: signal.Signals, to_group: bool, tmp_path: Path, data_args: list[str]
) -> None:
    args = [*data_args, "--nproc", str(nproc), "--batch-size-per-device", "16", "--steps", "400",
            "--checkpoint-every", "3", "--out", str(tmp_path)]
    process = start_child(
        train_command(*args), env=train_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    wait_for_checkpoint(tmp_path, process, timeout_s=90)
    if to_group:
        os.killpg(process.pid, stop_signal)
    else:
        process.send_signal(stop_signal)
    stdout, stderr = process.communicate(timeout=90)
    assert process.returncode == 128 + stop_signal, stdout + stderr  # 130 or 143, with one rank or several
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped_by_signal"] and summary["last_step"] < 400
    stopped = [line for line in stdout.splitlines() if "continue with --resume" in line]
    assert stopped == [f"{'[rank0]:' if nproc > 1 else ''}stopped by {stop_signal.name} after checkpointing step "
                       f"{summary['last_step']}; continue with --resume"], stdout
    assert stderr == "", stderr
    logs = "".join(path.read_text() for path in (tmp_path / "logs").rglob("*.log")) if nproc > 1 else ""
    for text in (stdout, logs):
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    latest = (tmp_path / "checkpoints" / "latest").read_text().strip()
    assert latest == f"step-{summary['last_step']:09d}.pt"

    # The resumed command in this process (with its ranks as its children where there are two):
    # what is tested is that the stop's checkpoint resumes, not the command's process.
    assert main(["train", *TINY_RUN, *[a if a != "400" else str(summary["last_step"] + 3) for a in args],
                 "--resume"]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["first_step"] == summary["last_step"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_on_loopback_end_with_the_parameters_of_one_node(
    two_rank_run: Path, tmp_path: Path, data_args: list[str]
) -> None:
    """Two `trainspeed train` processes, one rank each, meet at a static rendezvous on 127.0.0.1.
    Two ranks add two gradients, which is exact in any order, so the result equals one node's."""
    endpoint = f"127.0.0.1:{_free_port()}"

    def node_args(rank: int) -> list[str]:
        return [*data_args, "--nproc", "1", "--nnodes", "2", "--rdzv-backend", "static", "--node-rank", str(rank),
                "--rdzv-endpoint", endpoint, "--batch-size-per-device", str(PER_DEVICE), "--steps", str(STEPS),
                "--checkpoint-every", "4", "--out", str(tmp_path / f"node{rank}")]

    # Node 1's command in a process of its own, node 0's in this one (its agent and rank are its
    # children): two agents and two ranks meet as on two machines; node 0's command process adds nothing.
    node1 = start_child(train_command(*node_args(1)), env=train_env(), stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True)
    try:
        code0 = main(["train", *TINY_RUN, *node_args(0)])
        output1 = node1.communicate(timeout=180)[0]
    finally:
        if node1.poll() is None:
            node1.kill()
            node1.wait(30)
    assert [code0, node1.returncode] == [0, 0], output1
    summary = json.loads((tmp_path / "node0" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_batch"] == 2 * PER_DEVICE
    assert max_abs_difference(final_parameters(tmp_path / "node0"), final_parameters(two_rank_run)) == 0.0
