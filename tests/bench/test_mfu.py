"""A row's MFU: against the chip's nominal peak where one is known, else the measured matmul chain,
with --peak-tflops over both; the measured chain and the MFU against it stay beside it. Rows written
before the nominal peaks still load and still read as what they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.bench.mfu import Peaks, measured_peak_mfu, measured_peak_of, nominal_peak_mfu, with_flops
from trainspeed.nominal_peaks import nominal_peak
from trainspeed.bench.results import ResultRow, read_rows

V5E_BF16 = nominal_peak("TPU v5 lite", "bf16")
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def row(target: str = "jax:jit:bf16", device_name: str | None = "TPU v5 lite", samples_per_s: float = 1000.0) -> ResultRow:
    return ResultRow(run_id="r", timestamp="now", workload="w", size="s", target=target, batch_size=8, status="ok",
                     samples_per_s=samples_per_s, device_name=device_name)


def test_the_nominal_peak_is_mfus_and_the_measured_one_a_second_column():
    flops = 98.5e9  # 1,000 samples/s: 98.5 TFLOP/s, half the v5e's 197
    done = with_flops(row(), flops, Peaks(nominal=V5E_BF16, measured=171.0))
    assert done.achieved_tflops == pytest.approx(98.5)
    assert (done.peak_tflops, done.peak_tflops_source, done.mfu) == (197.0, "nominal", pytest.approx(0.5))
    assert done.nominal_peak_chip == "TPU v5e bf16" and "https://cloud.google.com/tpu/docs/v5e" in done.nominal_peak_source
    assert done.measured_peak_tflops == 171.0 and done.mfu_of_measured_peak == pytest.approx(98.5 / 171.0)
    assert nominal_peak_mfu(done) == done.mfu and measured_peak_mfu(done) == done.mfu_of_measured_peak


def test_a_device_without_a_nominal_peak_divides_by_the_measured_one():
    done = with_flops(row("cpu:eager:fp32", "AMD EPYC"), 1e9, Peaks(nominal=nominal_peak("AMD EPYC", "fp32"),
                                                                    measured=4.0))
    assert (done.peak_tflops, done.peak_tflops_source, done.mfu) == (4.0, "measured", pytest.approx(0.25))
    assert done.nominal_peak_chip is None and done.nominal_peak_source is None
    assert done.measured_peak_tflops == 4.0 and done.mfu_of_measured_peak == done.mfu
    assert nominal_peak_mfu(done) is None and measured_peak_mfu(done) == done.mfu


def test_a_given_peak_overrides_the_nominal_one():
    done = with_flops(row(), 98.5e9, Peaks(given=394.0, nominal=V5E_BF16))
    assert (done.peak_tflops, done.peak_tflops_source, done.mfu) == (394.0, "given", pytest.approx(0.25))
    assert done.nominal_peak_chip is None and done.measured_peak_tflops is None and done.mfu_of_measured_peak is None
    assert nominal_peak_mfu(done) == pytest.approx(0.5)  # the report's nominal column, from the table
    assert not Peaks(given=394.0).wants_measured and Peaks(nominal=V5E_BF16).wants_measured


def test_a_nominal_peak_below_the_achieved_rate_is_refused_and_the_measured_column_stays():
    done = with_flops(row(), 250e9, Peaks(nominal=V5E_BF16, measured=300.0))  # 250 TFLOP/s
    assert done.mfu is None and done.peak_refused == "nominal peak 197 TFLOP/s below achieved 250 TFLOP/s"
    assert done.mfu_of_measured_peak == pytest.approx(250 / 300)


def test_a_row_written_before_the_nominal_peaks_loads_and_reads_as_it_did(tmp_path):
    """A committed TPU row: its peak is the measured chain (peak_tflops_source "measured"), it has
    none of the new fields, and the nominal MFU is its achieved TFLOP/s over the v5e's 197."""
    line = next(line for line in (RESULTS / "tpu_named_models.jsonl").read_text().splitlines()
                if json.loads(line)["status"] == "ok")
    record = json.loads(line)
    new_fields = ("nominal_peak_chip", "nominal_peak_source", "measured_peak_tflops", "mfu_of_measured_peak",
                  "program_argument_bytes", "program_output_bytes", "program_alias_bytes",
                  "program_generated_code_bytes")
    assert not set(new_fields) & set(record)
    (tmp_path / "old.jsonl").write_text(line + "\n")
    (old,) = read_rows(tmp_path / "old.jsonl")
    assert old.peak_tflops_source == "measured" and old.measured_peak_tflops is None
    assert measured_peak_mfu(old) == old.mfu == record["mfu"] and measured_peak_of(old) == record["peak_tflops"]
    assert nominal_peak_mfu(old) == pytest.approx(record["achieved_tflops"] / 197.0)


def test_an_old_row_with_a_given_peak_has_no_measured_mfu():
    old = with_flops(row(), 98.5e9, Peaks(given=300.0))
    assert measured_peak_mfu(old) is None and measured_peak_of(old) is None
