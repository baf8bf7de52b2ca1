"""XLA data parallelism (SPMD over 2 virtual CPU devices) trains like one CPU rank at the same
global batch. XLA's CPU kernels round differently from eager's, by an amount that depends on the
CPU, so the comparison runs a float64 network (`float64_workload`), where rounding differences stay
far below ATOL_FLOAT64 (derived in test_data_parallel.py) while the parameters move by ~1e-2.

The XLA run is a child process (SPMD must be switched on before the process touches an XLA device,
and this one has); the CPU rank runs in the test's process. Neither measures the noise scale: the
meter reads the gradients and changes nothing, its graphs would double the XLA run's compilations,
and its path under SPMD runs in test_batch_schedule_runs.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from train_runs import (
    ATOL_FLOAT64,
    TINY_RUN,
    final_parameters,
    float64_initial_parameters,
    float64_workload,
    max_abs_difference,
    run_train,
)

from trainspeed.cli import main

pytestmark = pytest.mark.e2e

pytest.importorskip("torch_xla", reason="torch_xla is not installed (pip install .[xla])")

STEPS = 8


@pytest.mark.slow
def test_spmd_on_two_xla_devices_matches_one_cpu_rank_at_the_same_global_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = [*float64_workload(tmp_path), "--synthetic-data", "--steps", str(STEPS), "--checkpoint-every", "4",
              "--noise-scale", "off"]
    xla = run_train(*common, "--target", "xla:lazy:fp32", "--nproc", "2", "--batch-size-per-device", "16",
                    "--out", str(tmp_path / "xla"), timeout=180, extra_pythonpath=str(tmp_path))
    assert xla.returncode == 0, xla.stdout + xla.stderr
    initial = float64_initial_parameters(tmp_path, monkeypatch)  # puts tmp_path on sys.path for the CPU run too
    assert main(["train", *TINY_RUN, *common, "--target", "cpu:eager:fp32", "--batch-size-per-device", "32",
                 "--out", str(tmp_path / "cpu")]) == 0
    xla_params, cpu_params = final_parameters(tmp_path / "xla"), final_parameters(tmp_path / "cpu")
    assert all(tensor.dtype == torch.float64 for tensor in xla_params.values())
    assert max_abs_difference(cpu_params, initial) > 1e6 * ATOL_FLOAT64
    assert max_abs_difference(xla_params, cpu_params) <= ATOL_FLOAT64
    summary = json.loads((tmp_path / "xla" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["global_batch"] == 32
