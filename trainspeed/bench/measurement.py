"""Rows of the scripts in `benchmarks/` that measure something other than a training step: the
data loader's throughput, the rule-based agents' strength, the bench's own overhead, StyleGAN3's
saved activations. Each script keeps its own dataclass of what it measured and writes it as the
`values` of one of these rows, so every committed result file has a kind the report reads: it
shows them as a table per script, with the machine and the command.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import Any, ClassVar

from trainspeed.bench.environment import Machine


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
