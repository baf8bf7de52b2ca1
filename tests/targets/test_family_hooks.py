"""The protocol hooks a family whose device lives elsewhere needs, shown with the tests' own family
(toy_target.FarTarget): its own spelling of target names, extra fields in result rows, its own
peak, one rank only, and a lost device that stops a sweep with one line."""

from __future__ import annotations

import dataclasses

import pytest
from toy_target import FarTarget

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.sweep import run_sweep
from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.targets import get_target, target_family

QUICK = TimingPlan(warmup_steps=1, windows=2, min_window_s=0.01, max_steps_per_window=3)


@pytest.fixture
def far_family(monkeypatch):
    monkeypatch.setenv("TRAINSPEED_TARGET_FAMILIES", "far=toy_target:FarTarget")


def test_a_family_parses_its_own_names(far_family):
    target = get_target("far:there:eager:fp32")
    assert isinstance(target, FarTarget) and target.spec.place == "there"
    assert str(target) == "far:there:eager:fp32"
    with pytest.raises(UsageError, match="write far:PLACE"):
        get_target("far:there:eager")
    with pytest.raises(UsageError, match="nothing answers at nowhere"):
        target_family("far:nowhere:eager:fp32")


def test_row_fields_and_the_familys_peak_go_into_rows(far_family, tmp_results):
    config = BenchConfig(workload="mahjong", size="tiny", targets=["far:there:eager:fp32"], batch_sizes=[8],
                         out=tmp_results, plan=QUICK)
    (row,) = run_sweep(config)
    assert row.status == "ok" and row.transport == "pigeon" and row.link == "there"
    assert row.peak_tflops == 123.0 and row.peak_tflops_source == "measured"  # no nominal peak for its device
    assert row.measured_peak_tflops == 123.0 and row.mfu_of_measured_peak == row.mfu > 0
    assert row.nominal_peak_chip is None


def test_a_device_with_a_nominal_peak_divides_by_it_and_keeps_the_measured_one_beside(far_family, tmp_results,
                                                                                     monkeypatch):
    monkeypatch.setattr(FarTarget, "device_name", lambda self: "NVIDIA H100 80GB HBM3")
    config = BenchConfig(workload="mahjong", size="tiny", targets=["far:there:eager:fp32"], batch_sizes=[8],
                         out=tmp_results, plan=QUICK)
    (row,) = run_sweep(config)
    assert (row.peak_tflops, row.peak_tflops_source, row.nominal_peak_chip) == (67.0, "nominal", "NVIDIA H100 SXM fp32")
    assert row.mfu == pytest.approx(row.achieved_tflops / 67.0)
    assert row.measured_peak_tflops == 123.0 and row.mfu_of_measured_peak == pytest.approx(row.achieved_tflops / 123.0)

    (given,) = run_sweep(dataclasses.replace(config, peak_tflops=1000.0))
    assert (given.peak_tflops, given.peak_tflops_source, given.nominal_peak_chip) == (1000.0, "given", None)
    assert given.measured_peak_tflops is None and given.mfu_of_measured_peak is None


def test_a_lost_device_stops_the_sweep_with_one_line(far_family, tmp_results, capsys):
    FarTarget.steps_before_loss = 2
    try:
        code = main(["bench", "--targets", "far:there:eager:fp32", "--batch-sizes", "8,16", "--out", str(tmp_results),
                     "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1", "--no-progress"])
    finally:
        FarTarget.steps_before_loss = None
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err == ["trainspeed: error: target far:there:eager:fp32: the far device went away"]
    assert not tmp_results.exists() or tmp_results.read_text() == ""


def test_a_single_rank_family_refuses_several_ranks(far_family, tmp_path, capsys):
    code = main(["train", "--synthetic-data", "--target", "far:here:eager:fp32", "--nproc", "2", "--steps", "2",
                 "--batch-size-per-device", "8", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "trains on one rank only" in err[0], err
