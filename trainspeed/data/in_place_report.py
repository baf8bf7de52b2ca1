"""What `trainspeed data verify` found in data read where it lies: each format's verifier returns
one (`trainspeed.data.verify_in_place` dispatches to them). A module of its own, below both, so
the readers never import the dispatcher that imports them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InPlaceReport:
    described: str
    """What was checked, in words (`OK, <described>`)."""
    problems: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.problems
