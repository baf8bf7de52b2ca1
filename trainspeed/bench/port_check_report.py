"""The report's part for `trainspeed check --out` documents: one table of XLA port checks, so the
page says beside the XLA bench rows which models run whole on the device and which do not."""

from __future__ import annotations

from typing import Any, Sequence

from trainspeed.bench.port_check_rows import PortCheck
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, value_cell
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.report.provenance import provenance


def port_check_section(checks: Sequence[Read[Any]]) -> Section:
    section = Section(
        "xla-port-checks", "XLA port checks",
        "`trainspeed check` per workload: the aten ops torch_xla ran on the host in the measured steps "
        "(per step), the compilations among those steps and the device-to-host transfers per step, with "
        "the verdict; a ported step has none of the three.",
    )
    rows = sorted(checks, key=lambda read: (read.row.workload, read.row.size, read.row.target))
    section.tables.append(Table(
        "table-xla-port-checks", "Port checks",
        [("workload", False), ("size", False), ("target", False), ("batch", True), ("host fallbacks per step", False),
         ("compiles", True), ("device-to-host per step", True), ("verdict", False)],
        [[value_cell(r.row.workload), value_cell(r.row.size), value_cell(r.row.target), value_cell(r.row.batch_size),
          value_cell(", ".join(f"{op.op} {op.per_step:g}" for op in r.row.fallback_ops) or "none"),
          value_cell(r.row.compiles_in_steps), value_cell(r.row.device_to_host_per_step), value_cell(r.row.verdict)]
         for r in rows],
        provenance(rows)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    checks = inputs.of(PortCheck)
    return [port_check_section(checks)] if checks else []


PART = ReportPart(name="xla-port-checks", kinds=(RowKind(PortCheck),), sections=sections,
                  counts=lambda inputs: [("XLA port checks", len(inputs.of(PortCheck)))])
