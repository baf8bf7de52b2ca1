"""`trainspeed check --out` documents are rows the report reads: a table of the checks, each
with its fallbacks and verdict."""

from __future__ import annotations

from pathlib import Path

from trainspeed.bench.port_check import write_check
from trainspeed.bench.port_check_rows import FallbackOp, PortCheck, verdict
from trainspeed.kinds import read_inputs, render


def _check(workload: str, fallbacks: list[FallbackOp]) -> PortCheck:
    said = verdict(fallbacks, 0, 1.0 if fallbacks else 0.0)
    return PortCheck(timestamp="2026-01-01T00:00:00+00:00", workload=workload, size="tiny", target="xla:lazy:fp32",
                     device_name="XLA CPU", batch_size=8, warmup_steps=3, steps=5, fallback_ops=fallbacks,
                     compiles_in_steps=0, device_to_host_per_step=1.0 if fallbacks else 0.0, final_loss=2.3,
                     verdict=said, ported=not fallbacks)


def test_port_checks_written_by_check_are_one_table_of_the_report(tmp_path: Path) -> None:
    write_check(tmp_path / "a.json", _check("timm:resnet18", []))
    write_check(tmp_path / "b.json", _check("weighted", [FallbackOp("aten::bincount", 1.0, ["w.py:3 in step: x"])]))
    inputs = read_inputs([tmp_path])
    assert len(inputs.of(PortCheck)) == 2
    (read,) = [r for r in inputs.of(PortCheck) if r.row.workload == "weighted"]
    assert read.row.fallback_ops == [FallbackOp("aten::bincount", 1.0, ["w.py:3 in step: x"])]
    page = render(inputs)
    assert 'id="table-xla-port-checks"' in page and "aten::bincount 1" in page
    assert "not ported: 1 op falls back to the host (aten::bincount)" in page and "ported: no fallback" in page
