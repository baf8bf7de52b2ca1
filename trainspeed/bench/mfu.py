"""A row's achieved TFLOP/s and MFU from its samples/s, with no torch: the bench of exported steps,
which runs where only JAX is, writes them the same way as every other bench."""

from __future__ import annotations

import dataclasses

from trainspeed.bench.results import ResultRow


def refused_peak(achieved_tflops: float, peak_tflops: float, source: str | None) -> str | None:
    """Why `peak_tflops` cannot be this row's peak (None when it can): no step can run faster than
    the device's peak, so a peak below the achieved TFLOP/s is a wrong peak, and an MFU from it
    (above 100%) would be a wrong figure."""
    if achieved_tflops <= peak_tflops:
        return None
    return f"{source or 'given'} peak {peak_tflops:.4g} TFLOP/s below achieved {achieved_tflops:.4g} TFLOP/s"


def with_flops(row: ResultRow, flops_per_sample: float, peak_tflops: float | None, source: str | None) -> ResultRow:
    """Achieved TFLOP/s and MFU. A peak below the achieved rate is refused: the row keeps its
    samples/s and says why it has no MFU, rather than claiming more than 100%."""
    if row.samples_per_s is None:
        return row
    achieved = row.samples_per_s * flops_per_sample / 1e12
    refused = refused_peak(achieved, peak_tflops, source) if peak_tflops else None
    return dataclasses.replace(
        row,
        achieved_tflops=achieved,
        peak_tflops=peak_tflops,
        peak_tflops_source=source,
        mfu=achieved / peak_tflops if peak_tflops and not refused else None,
        peak_refused=refused,
    )
