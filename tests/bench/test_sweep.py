"""Sweeps: out-of-memory rows, recompiles inside timed windows, results that survive, what a row
records about its windows, and MFU only against a peak the row does not exceed."""

import dataclasses

import pytest
import torch
from child_commands import TESTS, run_trainspeed
from toy_workload import shrinking_after_the_warmup

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.mfu import Peaks
from trainspeed.bench.results import ResultRow, read_rows
from trainspeed.bench.sweep import measure_configuration, run_sweep, with_flops
from trainspeed.targets import available_targets, get_target

QUICK = TimingPlan(warmup_steps=1, windows=2, min_window_s=0.01, max_steps_per_window=3)


def test_an_impossible_batch_is_an_oom_row_and_the_sweep_goes_on(tmp_results):
    config = BenchConfig(
        workload="mahjong",
        size="tiny",
        targets=["cpu:eager:fp32", "cpu:eager:bf16"],
        batch_sizes=[16, 2**36, 2**37],
        out=tmp_results,
        plan=QUICK,
        peak_tflops=1.0,
    )
    rows = run_sweep(config)
    statuses = [(row.target, row.batch_size, row.status) for row in rows]
    for target in config.targets:
        assert (target, 16, "ok") in statuses
        assert (target, 2**36, "oom") in statuses
        assert (target, 2**37, "skipped") in statuses
    oom = next(row for row in rows if row.status == "oom")
    assert "allocate" in oom.error
    assert [dataclasses.asdict(r) for r in read_rows(tmp_results)] == [dataclasses.asdict(r) for r in rows]
    measured = next(row for row in rows if row.status == "ok")
    assert measured.mfu == pytest.approx(measured.achieved_tflops / 1.0)
    machine = measured.machine
    assert machine.torch_threads == torch.get_num_threads() and machine.torch_version == torch.__version__
    assert machine.cores_usable >= 1 and machine.load_average_end is not None
    assert measured.workload_module == "trainspeed.workloads.mahjong.workload" and len(measured.workload_sha256) == 64


@pytest.mark.slow
@pytest.mark.parametrize("name", ["xla:lazy:fp32", "cpu:compile:fp32"])
def test_a_recompile_inside_a_timed_window_marks_the_row_invalid(name):
    if available_targets()[name] is not None:
        pytest.skip(available_targets()[name])
    base = ResultRow(run_id="t", timestamp="now", workload="s", size="tiny", target=name, batch_size=8, status="skipped")
    row = measure_configuration(get_target(name), shrinking_after_the_warmup(), "tiny", 8, QUICK, 0, base)
    assert row.status == "invalid"
    assert row.compiles_in_windows >= 1


def test_each_compiling_row_says_how_many_its_process_compiled_before_it(tmp_results):
    """The first compiled configuration of a bench process also pays the compiler's start-up, which
    a training run pays at its first graph and later rows do not: each row of a compiling target
    counts those before it; an eager row has none."""
    name = "xla:lazy:fp32"
    if available_targets()[name] is not None:
        pytest.skip(available_targets()[name])
    rows = run_sweep(BenchConfig(workload="toy_workload:validated", size="tiny", targets=["cpu:eager:fp32", name],
                                 batch_sizes=[4, 8], out=tmp_results, plan=QUICK, peak_tflops=1.0))
    assert [(row.target, row.batch_size, row.compiles_before) for row in rows] == [
        ("cpu:eager:fp32", 4, None), ("cpu:eager:fp32", 8, None), (name, 4, 0), (name, 8, 1)]
    assert [row.compiles_before for row in read_rows(tmp_results)] == [None, None, 0, 1]


@pytest.mark.e2e
@pytest.mark.slow
def test_xla_works_in_a_fresh_process_whose_workload_counts_flops_with_a_backward(tmp_results):
    """Autograd fixes its device list at the first backward: the sweep must register XLA before
    asking the workload for its FLOPs. A fresh process, since this test session registered XLA early."""
    if available_targets()["xla:lazy:fp32"] is not None:
        pytest.skip(available_targets()["xla:lazy:fp32"])
    result = run_trainspeed(
        "bench", "--workload", "toy_workload:flops_counted_with_a_backward", "--targets", "xla:lazy:fp32",
        "--batch-sizes", "4", "--windows", "1", "--warmup-steps", "1", "--min-window-s", "0.01",
        "--peak-tflops", "1", "--out", str(tmp_results), "--no-progress", "--no-plot", path=(TESTS,))
    assert result.returncode == 0, result.stderr[-2000:]
    assert [row.status for row in read_rows(tmp_results)] == ["ok"]


def test_a_row_records_every_window_and_its_steps(tmp_results):
    plan = TimingPlan(warmup_steps=1, windows=3, min_window_s=0.02)
    (row,) = run_sweep(BenchConfig(workload="mahjong", size="tiny", targets=["cpu:eager:fp32"], batch_sizes=[8],
                                   out=tmp_results, plan=plan, peak_tflops=1.0))
    assert row.status == "ok" and len(row.window_s) == row.windows == 3
    assert min(row.window_s) >= row.min_window_s == 0.02 and row.steps_capped is False
    assert row.step_time_s == pytest.approx(sorted(row.window_s)[1] / row.steps_per_window)
    assert row.feed == "device" and row.bytes_per_step == 0 and row.cpu_s_per_wall_s > 0
    assert row.peak_memory_source == "host RSS growth" and row.peak_memory_bytes is not None
    assert read_rows(tmp_results) == [row]


def test_a_row_faster_than_its_peak_gets_no_mfu_and_says_why(tmp_results):
    base = ResultRow(run_id="t", timestamp="now", workload="w", size="s", target="cpu:eager:bf16", batch_size=8,
                     status="ok", samples_per_s=1000.0)
    refused = with_flops(base, flops_per_sample=1e9, peaks=Peaks(measured=0.5))
    assert refused.status == "ok" and refused.samples_per_s == 1000.0 and refused.achieved_tflops == pytest.approx(1.0)
    assert refused.mfu is None and refused.peak_refused == "measured peak 0.5 TFLOP/s below achieved 1 TFLOP/s"
    assert refused.measured_peak_tflops == 0.5 and refused.mfu_of_measured_peak is None
    kept = with_flops(base, flops_per_sample=1e9, peaks=Peaks(measured=2.0))
    assert kept.mfu == pytest.approx(0.5) and kept.peak_refused is None

    rows = run_sweep(BenchConfig(workload="mahjong", size="tiny", targets=["cpu:eager:fp32"], batch_sizes=[8],
                                 out=tmp_results, plan=QUICK, peak_tflops=1e-9))
    assert [(r.status, r.mfu) for r in rows] == [("ok", None)]
    assert rows[0].peak_refused.startswith("given peak 1e-09 TFLOP/s below achieved")
    assert rows[0].measured_peak_tflops is None and rows[0].mfu_of_measured_peak is None  # a given peak measures none


@pytest.mark.parametrize(("settings", "message"), [
    ({"batch_sizes": []}, "batch sizes must be positive integers up to 2^40, e.g. --batch-sizes 2^6..2^10"),
    ({"batch_sizes": [0, 8]}, "batch sizes must be positive integers up to 2^40"),
    ({"peak_tflops": float("inf")}, "--peak-tflops must be a positive number of TFLOP/s, got inf"),
    ({"threads": 0}, "--threads must be between 1 and "),
    ({"feeds": ["device", "device"]}, "bad feeds device,device: choose device, host, data or several"),
    ({"plan": TimingPlan(min_window_s=float("nan"))}, "--min-window-s must be a positive number of seconds, got nan"),
], ids=["no-batch-sizes", "batch-size-0", "infinite-peak", "no-threads", "a-feed-twice", "nan-window"])
def test_a_bench_config_made_in_python_is_checked_as_the_flags_are(settings: dict, message: str) -> None:
    """The CLI's parser refuses these values first; a study builds its BenchConfig in Python."""
    from trainspeed.errors import UsageError

    with pytest.raises(UsageError) as refused:
        BenchConfig(targets=["cpu:eager:fp32"], **settings)
    assert str(refused.value).startswith(message), refused.value
