"""A device family defined in this file only runs `bench`, and `train` on 1 and 2 ranks.

The family is registered for the CLI and every process it starts through TRAINSPEED_TARGET_FAMILIES;
nothing else in the project knows it. It drives the host CPU, written against the Target protocol
from scratch (not a subclass of the built-in CPU family), and names itself in `device_name`, so the
rows prove it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainspeed.targets.base import Target

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DEVICE_NAME = "host family defined in a test"


class HostTarget(Target):
    device_type = "cpu"  # torch's device type: autocast and tensors live there
    modes = ("eager",)
    precisions = ("fp32",)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return DEVICE_NAME

    def sync(self) -> None:
        """The CPU runs each kernel to its end before returning."""

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, MemoryError)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), str(HERE), env.get("PYTHONPATH")]))
    env["TRAINSPEED_TARGET_FAMILIES"] = "host=test_new_family:HostTarget"
    return env


def _trainspeed(*args: str) -> subprocess.CompletedProcess:
    # This module is also the family the child imports (from this folder alone), so the runner is
    # imported here, not at the top.
    from child_commands import run_child

    return run_child([sys.executable, "-m", "trainspeed", *args], env=_env(), timeout=300)


@pytest.mark.slow
def test_bench_measures_through_the_new_family(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    result = _trainspeed("bench", "--workload", "mahjong", "--size", "tiny", "--targets", "host:eager:fp32",
                         "--batch-sizes", "16", "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1",
                         "--peak-tflops", "1", "--threads", "1", "--no-progress", "--no-plot", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["target"] == "host:eager:fp32" and row["device_name"] == DEVICE_NAME
    assert row["status"] == "ok" and row["samples_per_s"] > 0


@pytest.mark.slow
def test_train_runs_on_one_and_two_ranks_of_the_new_family(tmp_path: Path) -> None:
    for nproc in (1, 2):
        out = tmp_path / f"ranks{nproc}"
        result = _trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data",
                             "--target", "host:eager:fp32", "--nproc", str(nproc), "--batch-size-per-device", "8",
                             "--steps", "4", "--threads", "1", "--no-progress", "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["target"] == "host:eager:fp32" and summary["world_size"] == nproc
        assert summary["last_step"] == 4 and summary["samples"] == 4 * 8 * nproc
