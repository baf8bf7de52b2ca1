"""The part of the report that lists each `trainspeed study` run: its estimate, its wall time, its files."""

from __future__ import annotations

from typing import Any, Sequence

from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, number, text
from trainspeed.report.part import ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.studies.rows import StudyRecord


def studies_section(rows: Sequence[Read[Any]]) -> Section:
    section = Section("studies", "Studies run", "Each `trainspeed study` run: its estimate, its wall time, its files.")
    section.tables.append(Table(
        "table-studies", "Studies",
        [("study", False), ("preset", False), ("started", False), ("estimate (s)", True), ("wall (s)", True),
         ("files", False)],
        [[text(r.row.study), text(r.row.preset), text(r.row.started), number(r.row.estimate_s),
          number(r.row.wall_s), text(", ".join(r.row.files))] for r in rows],
        provenance(rows)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    rows = inputs.of(StudyRecord)
    return [studies_section(rows)] if rows else []


PART = ReportPart(name="studies", kinds=(RowKind(StudyRecord),), sections=sections,
                  counts=lambda inputs: [("study records", len(inputs.of(StudyRecord)))])
