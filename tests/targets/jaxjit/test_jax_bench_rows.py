"""`trainspeed bench` measures a jax target beside the eager one, as any target: one measured row
per target and batch size, with what only the jax family records (the compile seconds of its
program, apart from the steps, and the JAX versions)."""

from __future__ import annotations

import json

import pytest

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None,
                                reason=str(JaxTarget.unavailable_reason()))

QUICK = ["--windows", "1", "--min-window-s", "0.05", "--warmup-steps", "1", "--no-plot", "--no-progress",
         "--peak-tflops", "1"]
"""Short windows, and a given peak (no matmul probe): the rows are checked, not the speeds."""


def test_bench_writes_measured_rows_for_eager_and_jax_targets(tmp_path, capsys) -> None:
    out = tmp_path / "rows.jsonl"
    code = main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32,jax:jit:fp32",
                 "--batch-sizes", "8,16", *QUICK, "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((row["target"], row["batch_size"]) for row in rows) == [
        ("cpu:eager:fp32", 8), ("cpu:eager:fp32", 16), ("jax:jit:fp32", 8), ("jax:jit:fp32", 16)]
    for row in rows:
        assert row["kind"] == "bench" and row["status"] == "ok" and row["error"] is None, row
        assert row["samples_per_s"] > 0 and row["compiles_in_windows"] == 0, row
    for row in (row for row in rows if row["target"] == "jax:jit:fp32"):
        assert row["compile_s"] > 0 and row["jax_versions"].startswith("jax "), row
        assert row["device_name"].startswith("JAX CPU"), row
        # XLA's memory analysis of the compiled step beside the runtime's peak: the state and batch
        # in, the new state out (the donated state reusing its buffers), and the temporaries.
        assert row["program_argument_bytes"] > 0 and row["program_output_bytes"] > 0, row
        assert row["program_alias_bytes"] > 0 and row["program_temp_bytes"] >= 0, row
        assert row["program_generated_code_bytes"] >= 0, row
    for row in (row for row in rows if row["target"] == "cpu:eager:fp32"):
        assert row["compile_s"] is None and row["jax_versions"] is None, row
        assert row["program_argument_bytes"] is None and row["program_output_bytes"] is None, row
    assert "jax:jit:fp32" in printed.out  # the ratio table has its column


@pytest.mark.parametrize("device_name, platform, precision, entry", [
    ("JAX CPU (cpu)", "cpu", "fp32", None),
    ("TPU v5 lite", "tpu", "bf16", "TPU v5e bf16"),
    ("TPU v5 lite", "tpu", "fp32", "TPU v5e fp32"),
    ("NVIDIA A100-SXM4-80GB", "gpu", "fp32", "NVIDIA A100 tf32"),  # JAX's default runs fp32 matmuls as TF32 there
    ("NVIDIA A100-SXM4-80GB", "gpu", "bf16", "NVIDIA A100 bf16"),
])
def test_the_jax_family_looks_up_its_chip_by_the_jax_devices_kind(monkeypatch, device_name, platform, precision,
                                                                  entry) -> None:
    from types import SimpleNamespace

    from trainspeed import jaxrt
    from trainspeed.targets import get_target

    target = get_target(f"jax:jit:{precision}")
    monkeypatch.setattr(jaxrt, "device_name", lambda: device_name)
    monkeypatch.setattr(jaxrt, "device", lambda: SimpleNamespace(platform=platform))
    found = target.nominal_peak()
    assert (found.entry if found is not None else None) == entry
