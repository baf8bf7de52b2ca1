"""The run summary's IO efficiency: the bench's samples/s of the run's configuration.

IO efficiency = (steady-state train samples/s per device) / (bench samples/s of the same workload,
size, target and per-device batch). The bench measures the step alone (no data IO, no gradient
all-reduce), so 1.0 means reading data and synchronising ranks cost nothing. The same ratio against
a `--synthetic-data` run of this loop isolates the data IO alone (benchmarks/bench_train_scaling.py).
"""

from __future__ import annotations

from pathlib import Path

from trainspeed.bench.results import read_rows
from trainspeed.errors import UsageError


def bench_samples_per_s(path: str | Path, workload: str, size: str, target: str, batch_size: int) -> float:
    """The bench's samples/s for one configuration (the newest matching `ok` row)."""
    try:
        rows = read_rows(Path(path))
    except UsageError as error:
        raise UsageError(f"train: --bench-jsonl: {error}") from None
    matching = [
        row for row in rows
        if (row.workload, row.size, row.target, row.batch_size, row.status) == (workload, size, target, batch_size, "ok")
    ]
    if not matching:
        raise UsageError(
            f"train: --bench-jsonl {path} has no ok row for {workload}/{size} on {target} at batch {batch_size}; "
            "run `trainspeed bench` for that configuration first"
        )
    return float(matching[-1].samples_per_s)
