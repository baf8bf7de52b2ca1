"""`trainspeed study all`'s one flag of its own, `--only`, and the studies it names; read without
torch by the face (`__init__.py`) and by the study itself (`study.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.flags import comma_list, flag_field

STUDY_NAMES = ("throughput", "remote", "scaling", "batch-size")
"""The studies it runs, in order (`study.STUDIES`, named here so that the flag reads without torch)."""


@dataclass(frozen=True)
class AllFlags:
    only: tuple[str, ...] | None = flag_field(
        None, read=comma_list(str, what="study names", example="throughput,scaling", choices=STUDY_NAMES),
        help="run only these studies, in the usual order", default_text="all of them")
