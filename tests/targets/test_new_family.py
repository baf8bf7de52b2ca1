"""A device family that only the environment names runs `bench`, and `train` on 1 and 2 ranks.

The family (toy_target.HostTarget) is registered for the CLI and every process it starts through
TRAINSPEED_TARGET_FAMILIES; nothing in trainspeed knows it. It drives the host CPU, written
against the Target protocol from scratch (not a subclass of the built-in CPU family), and names
itself in `device_name`, so the rows prove it ran.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from child_commands import TESTS
from toy_target import DEVICE_NAME

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


@pytest.fixture
def host_family(monkeypatch: pytest.MonkeyPatch) -> None:
    """The family registered as a user's shell would: in the environment of the command, run in
    this process (its own process is not what is tested), and of every process it starts, which
    import it from PYTHONPATH."""
    monkeypatch.setenv("TRAINSPEED_TARGET_FAMILIES", "host=toy_target:HostTarget")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(TESTS))


@pytest.mark.slow
def test_bench_measures_through_the_new_family(tmp_path: Path, host_family: None, capsys) -> None:
    out = tmp_path / "bench.jsonl"
    code = main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "host:eager:fp32",
                 "--batch-sizes", "16", "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1",
                 "--peak-tflops", "1", "--threads", "1", "--no-progress", "--no-plot", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["target"] == "host:eager:fp32" and row["device_name"] == DEVICE_NAME
    assert row["status"] == "ok" and row["samples_per_s"] > 0


@pytest.mark.slow
def test_train_runs_on_one_and_two_ranks_of_the_new_family(tmp_path: Path, host_family: None, capfd) -> None:
    for nproc in (1, 2):
        out = tmp_path / f"ranks{nproc}"
        code = main(["train", "--workload", "mahjong", "--size", "tiny", "--synthetic-data",
                     "--target", "host:eager:fp32", "--nproc", str(nproc), "--batch-size-per-device", "8",
                     "--steps", "4", "--threads", "1", "--no-progress", "--out", str(out)])
        printed = capfd.readouterr()
        assert code == 0, printed.out + printed.err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["target"] == "host:eager:fp32" and summary["world_size"] == nproc
        assert summary["last_step"] == 4 and summary["samples"] == 4 * 8 * nproc
