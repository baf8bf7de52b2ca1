"""`bench --devices N` on the jax family: each step over a data-parallel mesh of N local devices
(here JAX's CPU host devices, which the bench asks for before JAX starts, so in a process of its
own), the rows saying their devices and giving TFLOP/s per device; anything else is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import run_ok

from trainspeed.targets.jaxjit import JaxTarget

jax_here = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


@jax_here
@pytest.mark.e2e
def test_a_bench_over_two_devices_writes_rows_of_the_mesh_with_tflops_per_device(tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.jsonl"
    shown = run_ok("bench", "--workload", "mahjong", "--size", "tiny", "--targets", "jax:jit:fp32", "--devices", "2",
                   "--batch-sizes", "8,16", "--windows", "2", "--min-window-s", "0.05", "--no-plot", "--no-progress",
                   "--out", str(rows_file), timeout=300)
    assert "jax:jit:fp32 mesh x2" in shown.stdout
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [(row["batch_size"], row["status"], row["devices"]) for row in rows] == [(8, "ok", 2), (16, "ok", 2)]
    for row in rows:
        assert row["achieved_tflops"] == pytest.approx(row["samples_per_s"] * row["flops_per_sample"] / 1e12 / 2)


@pytest.mark.parametrize("flags, says", [
    (["--targets", "cpu:eager:fp32", "--devices", "2", "--batch-sizes", "8"],
     "--devices 2: cpu:eager:fp32 does not step over a mesh of devices in a bench; give jax targets only"),
    (["--targets", "jax:jit:fp32", "--devices", "3", "--batch-sizes", "8,12"],
     "--devices 3 must divide every batch size (each device takes an equal slice); 8 do not"),
])
def test_devices_a_bench_cannot_use_are_one_line_before_anything_runs(
        tmp_path: Path, cli_error, flags: list[str], says: str) -> None:
    rows_file = tmp_path / "rows.jsonl"
    assert says in cli_error("bench", "--workload", "mahjong", "--size", "tiny", *flags, "--no-plot",
                             "--out", str(rows_file))
    assert not rows_file.exists()
