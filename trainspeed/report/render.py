"""`trainspeed report`'s page: the Jinja2 template `templates/report.html.j2` filled with the
sections of every part that has rows.

Figures are inline SVG (no files beside the page, nothing fetched), tables sort on a click on their
header (a small inline script), and every figure and table names the commands that produced its
rows, the machine they ran on and the files they came from (`provenance.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import jinja2

from trainspeed.atomic import atomic_write_shown_text
from trainspeed.report.inputs import ReportInputs
from trainspeed.report.page import NOT_RECORDED, Section
from trainspeed.report.part import ReportPart


def build_sections(inputs: ReportInputs, parts: Sequence[ReportPart], baselines: Sequence[str] = ()) -> list[Section]:
    """Every part's sections in the parts' order; a section without figures or tables is left off."""
    sections = [section for part in parts for section in part.sections(inputs, baselines)]
    return [section for section in sections if section.figures or section.tables]


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("trainspeed.report", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
    )


def render(inputs: ReportInputs, parts: Sequence[ReportPart], title: str = "trainspeed report",
           baselines: Sequence[str] = ()) -> str:
    counts = [(what, n) for part in parts for what, n in part.counts(inputs) if n]
    statuses = {getattr(read.row, "status", None) for rows in inputs.rows.values() for read in rows}
    return _environment().get_template("report.html.j2").render(
        title=title, sections=build_sections(inputs, parts, baselines), files=inputs.files, not_recorded=NOT_RECORDED,
        counts=counts, statuses=sorted(status for status in statuses if isinstance(status, str) and status != "ok"),
    )


def write_report(inputs: ReportInputs, parts: Sequence[ReportPart], out: Path, title: str = "trainspeed report",
                 baselines: Sequence[str] = ()) -> Path:
    atomic_write_shown_text(out, render(inputs, parts, title, baselines))
    return out
