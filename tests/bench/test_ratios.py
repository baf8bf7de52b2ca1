"""Ratios pair a row only with the baseline of its own run; "newest" means the latest timestamp
whatever the order rows were read in; remote over local is one ratio, remote / local."""

import dataclasses

import pytest

from trainspeed.bench.ratios import (
    LOCAL_FAMILIES,
    format_table,
    latest_rows,
    ratio_table,
    remote_over_local,
    remote_pairs,
)
from trainspeed.bench.results import ResultRow


def _row(target, batch, rate, run_id="r", timestamp="2026-01-01T00:00:00+00:00", **fields):
    return ResultRow(run_id=run_id, timestamp=timestamp, workload="mahjong", size="tiny", target=target,
                     batch_size=batch, status="ok", samples_per_s=rate, **fields)


def test_the_newest_row_is_the_latest_timestamp_whatever_the_order_of_the_files():
    old = _row("cpu:eager:fp32", 64, 100.0, timestamp="2026-01-01T00:00:00Z")
    new = _row("cpu:eager:fp32", 64, 200.0, timestamp="2026-01-01T01:00:00+00:00")
    assert latest_rows([new, old]) == [new] and latest_rows([old, new]) == [new]
    again = dataclasses.replace(new, samples_per_s=300.0)
    assert latest_rows([new, again]) == [again]  # equal timestamps: the one read last


def test_a_ratio_takes_the_baseline_of_its_own_run_and_none_from_another():
    rows = [_row("cpu:eager:fp32", 64, 1000.0, run_id="a"), _row("cpu:compile:fp32", 64, 1500.0, run_id="a"),
            _row("cpu:eager:fp32", 64, 2000.0, run_id="b", timestamp="2026-01-02T00:00:00+00:00"),
            _row("xla:lazy:fp32", 64, 1800.0, run_id="c")]
    table = ratio_table(rows, "cpu:eager:fp32")
    assert table.ratio("cpu:compile:fp32", 64) == pytest.approx(1.5)  # not 1500 / 2000
    assert table.ratio("xla:lazy:fp32", 64) is None
    text = format_table(table)
    assert "(1.50x)" in text and "1,800 (-)" in text and "(-) no baseline in this run" in text


def test_the_default_baseline_is_trainspeeds_own_eager_fp32_target_not_a_peers():
    rows = [_row("reference-torch:cpu:eager:fp32", 64, 900.0), _row("cpu:eager:fp32", 64, 1000.0)]
    assert ratio_table(rows).baseline == "cpu:eager:fp32"


def test_remote_over_local_pairs_the_local_row_of_the_same_run():
    remote = "remote:127.0.0.1:1/cpu:eager:fp32/link=loopback"
    rows = [_row("cpu:eager:fp32", 64, 900.0, run_id="x", feed="host"),
            _row(remote, 64, 300.0, run_id="x", feed="host", transport="grpc", link="loopback", in_flight=1),
            _row("cpu:eager:fp32", 64, 1800.0, run_id="later", feed="host", timestamp="2027-01-01T00:00:00+00:00")]
    (pair,) = remote_pairs(rows)
    assert pair.local.run_id == "x" and pair.ratio == pytest.approx(300.0 / 900.0)
    assert remote_over_local(pair.remote, None) is None


def test_a_negative_wire_time_is_no_wire_time():
    row = _row("remote:h:1/cpu:eager:fp32", 64, 300.0, transport="grpc", step_time_s=0.2, server_step_s=0.25)
    assert row.wire_s is None and row.wire_flagged
    fine = dataclasses.replace(row, server_step_s=0.15)
    assert fine.wire_s == pytest.approx(0.05) and not fine.wire_flagged
    assert dataclasses.replace(fine, wire_time_suspect=True).wire_flagged


def test_the_local_families_the_ratios_know_are_the_registrys_own():
    """The ratios read rows without the targets (they need torch), so they keep the names of the
    local families; the registry is where those families are."""
    from trainspeed.targets import BUILTIN_FAMILIES

    assert set(LOCAL_FAMILIES) == {name for name, family in BUILTIN_FAMILIES.items() if name != "remote"}
