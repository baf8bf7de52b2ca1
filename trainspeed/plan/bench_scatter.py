"""How far one bench row's step time may lie from what a run steps at, beyond the spread of the
row's own timed windows.

A bench row's windows are seconds of one process, back to back; a run is another process at
another moment, and on a shared machine the load moves between the two. The rows of one target,
measured one after another at different batches, show how much: they scatter about a smooth curve
in the batch by more than their windows do. That scatter is measured from the rows themselves
(each row against the line through its two neighbours, in log samples/s against log batch; a curve
that truly bends only adds to it, which errs wide), and every row the plan reads is drawn at it,
one draw per row, so that a row read twice (the step's and the efficiency's at the same batch)
cancels as it does in the prediction. Nothing here imports torch.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from trainspeed.bench.results import ResultRow
from trainspeed.report.inputs import Read

MIN_RESIDUALS = 2
"""Rows between two neighbours it takes to measure the scatter (four rows of one target); with
fewer, the windows' spread is all the rows give."""


@dataclass(frozen=True)
class BenchScatter:
    """The scatter of one target's bench rows about a smooth curve: a standard deviation of log
    samples/s, over `residuals` rows with a neighbour on each side (its draws are t-distributed)."""

    target: str
    log_sd: float
    residuals: int

    @property
    def source(self) -> str:
        return (f"the scatter of {self.target}'s bench rows about a smooth curve in the batch, log sd "
                f"{self.log_sd:.3f} over {self.residuals} rows")


def _newest_per_batch(reads: Sequence[Read[ResultRow]]) -> list[Read[ResultRow]]:
    newest: dict[int, Read[ResultRow]] = {}
    for read in reads:
        known = newest.get(read.row.batch_size)
        if read.row.samples_per_s and (known is None or read.row.timestamp > known.row.timestamp):
            newest[read.row.batch_size] = read
    return [newest[batch] for batch in sorted(newest)]


def bench_scatter(reads: Sequence[Read[ResultRow]], target: str) -> BenchScatter | None:
    """The scatter of `target`'s rows (the newest at each batch): each interior row's log
    samples/s less the line through its neighbours' at its log batch, its variance over
    1 + w^2 + (1 - w)^2 (the neighbours' own scatter in the line, w their weights). None with fewer
    than `MIN_RESIDUALS` interior rows."""
    rows = _newest_per_batch([read for read in reads if read.row.target == target])
    if len(rows) < MIN_RESIDUALS + 2:
        return None
    x = [math.log(read.row.batch_size) for read in rows]
    y = [math.log(read.row.samples_per_s) for read in rows]  # type: ignore[arg-type]
    squares = weights = 0.0
    for index in range(1, len(rows) - 1):
        share = (x[index] - x[index - 1]) / (x[index + 1] - x[index - 1])
        line = (1 - share) * y[index - 1] + share * y[index + 1]
        squares += (y[index] - line) ** 2
        weights += 1 + share**2 + (1 - share) ** 2
    return BenchScatter(target, math.sqrt(squares / weights), len(rows) - 2)


def row_factors(read: Read[ResultRow], scatter: BenchScatter | None, count: int) -> np.ndarray:
    """`count` factors the row's step time lies at from a run's, exp(log_sd x t): the same draws
    for the same row wherever it is read (its generator is seeded by the row), all 1 without a
    scatter."""
    if scatter is None or scatter.log_sd <= 0:
        return np.ones(count)
    key = f"{read.row.target}/{read.row.batch_size}/{read.row.timestamp}/{read.row.run_id}"
    generator = np.random.default_rng(zlib.crc32(key.encode()))
    return np.exp(scatter.log_sd * generator.standard_t(scatter.residuals, count))
