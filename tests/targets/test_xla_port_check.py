"""The XLA port check: an op torch_xla 2.9 runs on the host (`torch.bincount`, counted as
`aten::bincount`) is named with the workload's line that called it, a step that reads its loss on
the host is a host sync, one whose shapes change recompiles, a clean step is ported, and bench
rows of an XLA target carry the counts of their timed windows.

The workloads are the tests' toy (tests/toy_workload.py) with those habits; `tests/cli/test_check.py`
runs one through the command too.
"""

from __future__ import annotations

import dataclasses

import pytest

from trainspeed.bench.config import TimingPlan
from trainspeed.bench.port_check import PORTED, PortCheck, PortCheckConfig, StepFailed, run_port_check
from trainspeed.bench.report import port_cell
from trainspeed.bench.results import ResultRow
from trainspeed.bench.sweep import measure_configuration
from trainspeed.rows import Source, parse_row, row_record
from trainspeed.targets import available_targets, get_target

XLA = "xla:lazy:fp32"
pytestmark = pytest.mark.skipif(available_targets()[XLA] is not None, reason="torch_xla not installed")

FALLBACK_LINE = 'counts = torch.bincount(batch["y"], minlength=self.classes)'


def _check(factory: str) -> PortCheck:
    return run_port_check(PortCheckConfig(workload=f"toy_workload:{factory}", target=XLA, batch_size=16,
                                          warmup_steps=2, steps=3))


def test_a_fallback_op_is_named_with_the_line_that_called_it():
    check = _check("class_weighted")
    ops = {op.op: op for op in check.fallback_ops}
    assert set(ops) == {"aten::bincount"} and ops["aten::bincount"].per_step == 1.0
    (caller,) = ops["aten::bincount"].called_from
    assert "tests/toy_workload.py:" in caller and caller.endswith(FALLBACK_LINE), caller
    assert " in train_step: " in caller
    assert check.compiles_in_steps == 0 and check.device_to_host_per_step > 0 and not check.ported
    assert check.verdict.startswith("not ported: 1 op falls back to the host (aten::bincount)")
    text = "\n".join(check.lines())
    assert f"called from {caller}" in text and "aten::bincount: 1" in text


def test_a_clean_step_is_ported_a_loss_read_on_the_host_is_a_sync_and_new_shapes_recompile():
    clean = _check("ToyWorkload")
    assert clean.ported and clean.verdict == PORTED and clean.fallback_ops == []
    assert clean.compiles_in_steps == 0 and clean.device_to_host_per_step == 0
    reading = _check("loss_reading")
    (op,) = reading.fallback_ops
    assert op.op == "aten::_local_scalar_dense" and op.is_host_read and op.per_step == 1.0
    assert op.called_from and op.called_from[0].endswith("self.logged.append(loss.item())")
    assert reading.device_to_host_per_step == 1.0
    assert reading.verdict == "not ported: 1 host sync per step (.item() or the like)"
    changing = _check("shrinking")
    assert changing.compiles_in_steps == 3 and changing.fallback_ops == [] and changing.device_to_host_per_step == 0
    assert changing.verdict.startswith("not ported: 3 recompiles in the measured steps")


def test_xla_bench_rows_carry_the_counts_of_their_timed_windows_and_read_back():
    from trainspeed.workloads import get_workload

    target = get_target(XLA)
    base = ResultRow(run_id="t", timestamp="now", workload="class-weighted", size="tiny", target=XLA, batch_size=16,
                     status="skipped")
    plan = TimingPlan(warmup_steps=1, windows=2, min_window_s=0.01, max_steps_per_window=4)
    row = measure_configuration(target, get_workload("toy_workload:class_weighted"), "tiny", 16, plan, 0, base)
    assert row.status == "ok" and row.xla_fallback_ops == {"aten::bincount": 1.0}
    assert row.xla_compiles_in_window == 0 and row.xla_device_to_host_per_step > 0
    assert row.xla_port_findings[0] == "fallback aten::bincount 1/step"
    # the PJRT CPU client's buffers are this process's memory: the row records its growth
    assert row.peak_memory_source == "host RSS growth" and row.peak_memory_bytes is not None
    read, _ = parse_row(ResultRow, row_record(row), Source("rows.jsonl", 1))
    assert read == row
    old = {key: value for key, value in row_record(row).items() if not key.startswith("xla_")}
    old_row, _ = parse_row(ResultRow, old, Source("old.jsonl", 1))
    assert old_row.xla_fallback_ops is None and old_row.xla_port_findings is None
    flagged, clean = port_cell(row), port_cell(dataclasses.replace(
        row, xla_fallback_ops={}, xla_compiles_in_window=0, xla_device_to_host_per_step=0.0))
    assert flagged.status == "invalid" and flagged.text.startswith("fallback aten::bincount 1/step; ")
    assert clean.text == "ported" and clean.status == "ok" and port_cell(old_row).text == "–"


def test_a_step_that_fails_where_an_op_fell_back_names_that_op():
    """Mixtral's router does this in transformers: an integer histogram, which XLA sends to the
    host, whose kernel refuses integers; the one line says which op went there."""
    with pytest.raises(StepFailed, match=r"a step of int-histogram tiny failed on xla:lazy:fp32: NotImplementedError: "
                                         r".*\(ops run on the host before it failed: aten::histc\)"):
        _check("int_histogram")
