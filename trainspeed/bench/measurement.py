"""Rows of the scripts in `benchmarks/` that measure something other than a training step: the
data loader's throughput, the rule-based agents' strength, the bench's own overhead, StyleGAN3's
saved activations. Each script keeps its own dataclass of what it measured and writes it as the
`values` of one of these rows, so every committed result file has a kind the report reads: it
shows them as a table per script, with the machine and the command (`PART`).
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from trainspeed.machine import Machine
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, slug, value_cell
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.report.provenance import provenance


@dataclass(frozen=True)
class MeasurementRow:
    KIND: ClassVar[str] = "measurement"
    SCHEMA_VERSION: ClassVar[int] = 1

    benchmark: str
    """Which script measured it: "loader", "agents", "harness-overhead", "stylegan3-saved-memory"."""
    values: dict[str, Any]
    """What it measured, by name: numbers, strings, booleans, lists of them."""
    command: str | None
    timestamp: str | None
    machine: Machine | None

    @classmethod
    def of(cls, benchmark: str, values: Any, command: str, machine: Machine) -> "MeasurementRow":
        """A row of a script's own dataclass of values (or a dict)."""
        fields = dataclasses.asdict(values) if dataclasses.is_dataclass(values) else dict(values)
        return cls(benchmark=benchmark, values=fields, command=command,
                   timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   machine=machine)


def measurement_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section(
        "measurements", "Other measurements",
        "What the scripts in benchmarks/ measure besides training steps (the data loader, the rule-based agents, "
        "the bench's own overhead, StyleGAN3's saved activations), one table per script, every row as written.",
    )
    for benchmark in dict.fromkeys(read.row.benchmark for read in rows):
        own = [read for read in rows if read.row.benchmark == benchmark]
        names = list(dict.fromkeys(name for read in own for name in read.row.values))
        section.tables.append(Table(
            f"table-measurement-{slug(benchmark)}", benchmark,
            [(name, False) for name in names],
            [[value_cell(read.row.values.get(name)) for name in names] for read in own],
            provenance(own)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    rows = inputs.of(MeasurementRow)
    return [measurement_section(rows)] if rows else []


PART = ReportPart(name="measurements", kinds=(RowKind(MeasurementRow),), sections=sections,
                  counts=lambda inputs: [("other measurements", len(inputs.of(MeasurementRow)))])
