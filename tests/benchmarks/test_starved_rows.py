"""starved_rows lists the configurations whose newest row ran without a core of its own."""

import dataclasses

from benchmarks.starved_rows import main
from trainspeed.bench.results import ResultRow
from trainspeed.rows import row_line


def _row(target, batch_size, cpu_s_per_wall_s, feed="device", status="ok"):
    return ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target=target, batch_size=batch_size,
                     status=status, samples_per_s=100.0, cpu_s_per_wall_s=cpu_s_per_wall_s, feed=feed)


def test_only_newest_measured_rows_below_the_threshold_are_listed(tmp_path, capsys):
    rows = [
        _row("cpu:eager:fp32", 64, 0.5),
        _row("cpu:eager:fp32", 64, 0.99),  # measured again with its core: not listed
        _row("cpu:eager:fp32", 128, 0.6, feed="host"),
        _row("cpu:eager:fp32", 128, 1.0),
        _row("xla:lazy:fp32", 64, None),  # written before the field existed
        _row("xla:lazy:fp32", 128, 1.4),
        dataclasses.replace(_row("xla:lazy:fp32", 256, None, status="oom"), samples_per_s=None),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(row_line(row) + "\n" for row in rows))
    assert main([str(path), "--below", "0.9"]) == 0
    assert capsys.readouterr().out.splitlines() == ["cpu:eager:fp32 128 host"]
    assert main([str(tmp_path / "missing.jsonl")]) == 2
