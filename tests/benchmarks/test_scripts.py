"""The measuring scripts of benchmarks/ at their smallest: each writes rows the report reads."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from child_commands import run_child

from benchmarks import (
    bench_agents,
    bench_harness_overhead,
    bench_loader,
    mahjong_attention,
    stylegan3_saved_memory,
)
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.kinds import read_inputs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _measurements(path: Path) -> list[dict]:
    reads = read_inputs([path]).of(MeasurementRow)
    assert reads and all(read.row.machine is not None and read.row.command.startswith("python benchmarks/")
                         for read in reads)
    return [read.row.values for read in reads]


def test_saved_memory_rows(tmp_path):
    out = tmp_path / "saved.jsonl"
    stylegan3_saved_memory.main(["--cases", "tiny-t:2", "--variants", "none,activation", "--out", str(out)])
    none, activation = _measurements(out)
    assert none["variant"] == "none" and none["g_main_saved_gib"] > activation["g_main_saved_gib"] > 0


@pytest.mark.slow
def test_agent_rows(tmp_path):
    out = tmp_path / "agents.jsonl"
    bench_agents.main(["--games", "2", "--workers", "1", "--out", str(out)])
    rows = _measurements(out)
    assert [row["match"] for row in rows] == ["rule_vs_random", "rule_vs_no_defence", "rule_vs_rule"]
    assert all(row["games"] == 2 and 1 <= row["rule_mean_rank"] <= 4 for row in rows)


@pytest.mark.e2e
@pytest.mark.slow
def test_loader_rows(tmp_path, selfplay_data):
    out = tmp_path / "loader.jsonl"
    bench_loader.main(["--data", str(selfplay_data), "--batch-sizes", "64", "--workers", "0", "--epochs", "1", "--time-checks",
                       "--out", str(out)])
    loader, cost = _measurements(out)
    assert loader["num_workers"] == 0 and loader["samples_per_s"] > 0 and 0 < cost["check_fraction"]


@pytest.mark.slow
def test_harness_overhead_row(tmp_path):
    out = tmp_path / "harness.json"
    bench_harness_overhead.main(["--batch-size", "8", "--rounds", "1", "--windows", "1", "--min-window-s", "0.01",
                                 "--out", str(out)])
    (row,) = _measurements(out)
    assert len(row["bench_samples_per_s"]) == len(row["loop_samples_per_s"]) == 1 and row["bench_over_loop_per_round"][0] > 0


def test_the_attention_script_runs_on_the_cpu(tmp_path):
    out = tmp_path / "attention.jsonl"
    assert mahjong_attention.main(["--device", "cpu", "--size", "tiny", "--batch", "8", "--dtype", "fp32",
                                   "--repeats", "1", "--out", str(out)]) == 0
    assert out.read_text().count("\n") >= 2


@pytest.mark.e2e
@pytest.mark.slow
def test_the_triton_kernel_check_runs_in_tritons_interpreter_on_the_cpu(tmp_path):
    pytest.importorskip("triton", reason="triton is not installed")
    out = tmp_path / "triton.jsonl"
    result = run_child([sys.executable, "benchmarks/check_triton_lrelu.py", "--size", "tiny-t", "--batch", "1",
                             "--dtypes", "fp32", "--device", "cpu", "--max-channels", "2", "--max-layers", "1",
                             "--repeats", "1", "--out", str(out)], timeout=600,
                            env={**os.environ, "TRITON_INTERPRET": "1"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "1 layers checked, 0 problems" in result.stdout and out.read_text().count("\n") == 1


@pytest.mark.e2e
def test_the_fused_attention_kernel_check_runs_in_pallas_interpreter_and_writes_measurement_rows(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed")
    out = tmp_path / "kernel.jsonl"
    result = run_child([sys.executable, "benchmarks/qkv_attention_kernel.py", "--batch-sizes", "2,4", "--precisions",
                        "float32", "--heads", "2", "--head-dim", "8", "--tokens", "5", "--interpret", "--out", str(out)],
                       timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = [read.row for read in read_inputs([out]).of(MeasurementRow)]
    assert [row.values["batch"] for row in rows] == [2, 4] and {row.benchmark for row in rows} == {"qkv-attention-kernel"}
    assert all(row.values["output_rel_diff"] < 1e-5 and row.values["gradient_rel_diff"] < 1e-5 for row in rows)
    assert all(row.values["jax_versions"].startswith("jax ") for row in rows)
