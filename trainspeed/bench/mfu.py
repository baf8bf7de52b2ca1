"""A row's achieved TFLOP/s and MFU from its samples/s, with no torch: the bench of exported steps,
which runs where only JAX is, writes them the same way as every other bench.

MFU divides by the chip's nominal peak where one is known (`nominal_peaks.py`: the figure the
field's MFU is taken against), else by the matmul chain measured on the device; `--peak-tflops`
overrides both. The measured chain stays in every row that measured it, with the MFU against it
beside the row's MFU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

from trainspeed.nominal_peaks import NominalPeak, nominal_peak, precision_of_target
from trainspeed.bench.results import ResultRow


@dataclass(frozen=True)
class Peaks:
    """The peaks one target's rows may divide by: a given one (--peak-tflops), the chip's nominal
    one in the target's precision, the one measured on the device (once a row was measured)."""

    given: float | None = None
    nominal: NominalPeak | None = None
    measured: float | None = None

    def chosen(self) -> tuple[float | None, str | None]:
        """MFU's peak and its source: given over nominal over measured (None, None: none yet)."""
        if self.given:
            return self.given, "given"
        if self.nominal is not None:
            return self.nominal.tflops, "nominal"
        if self.measured:
            return self.measured, "measured"
        return None, None

    @property
    def wants_measured(self) -> bool:
        """Whether the device's peak is still to be measured: it is, unless a peak was given (then
        no chain is run: the user named the peak, and the probe's seconds are saved)."""
        return not self.given and self.measured is None


def refused_peak(achieved_tflops: float, peak_tflops: float, source: str | None) -> str | None:
    """Why `peak_tflops` cannot be this row's peak (None when it can): no step can run faster than
    the device's peak, so a peak below the achieved TFLOP/s is a wrong peak, and an MFU from it
    (above 100%) would be a wrong figure."""
    if achieved_tflops <= peak_tflops:
        return None
    return f"{source or 'given'} peak {peak_tflops:.4g} TFLOP/s below achieved {achieved_tflops:.4g} TFLOP/s"


def _share(achieved: float, peak: float | None, source: str | None) -> tuple[float | None, str | None]:
    """achieved / peak, or None and why where the peak is below the achieved rate (or absent)."""
    if not peak:
        return None, None
    refused = refused_peak(achieved, peak, source)
    return (None, refused) if refused else (achieved / peak, None)


def with_flops(row: ResultRow, flops_per_sample: float, peaks: Peaks, devices: int = 1) -> ResultRow:
    """Achieved TFLOP/s per device (the row's rate over its `devices`), MFU against the chosen
    peak (one device's), and the measured peak with the MFU against it beside. A peak below the
    achieved rate is refused: the row keeps its samples/s and says why it has no MFU, rather than
    claiming more than 100%."""
    if row.samples_per_s is None:
        return row
    achieved = row.samples_per_s * flops_per_sample / 1e12 / devices
    peak, source = peaks.chosen()
    mfu, refused = _share(achieved, peak, source)
    nominal = peaks.nominal if source == "nominal" else None
    return dataclasses.replace(
        row,
        achieved_tflops=achieved,
        peak_tflops=peak,
        peak_tflops_source=source,
        mfu=mfu,
        peak_refused=refused,
        nominal_peak_chip=nominal.entry if nominal else None,
        nominal_peak_source=nominal.source if nominal else None,
        measured_peak_tflops=peaks.measured,
        mfu_of_measured_peak=_share(achieved, peaks.measured, "measured")[0],
    )


# --- reading a row's MFU against either peak, old rows included ------------------------------------

PEAK_WORDS = {"nominal": "the chip's nominal peak", "measured": "the measured matmul peak",
              "given": "the peak given (--peak-tflops)"}
"""A row's peak_tflops_source, as figures and tables say what MFU divides by."""


def peaks_said(sources: Iterable[str | None]) -> str:
    """What the MFU of rows with these peak sources divides by, in words: the one source's, or
    "each row's peak (measured, nominal)" where they differ."""
    named = sorted({source for source in sources if source})
    if len(named) == 1:
        return PEAK_WORDS.get(named[0], f"a {named[0]} peak")
    return f"each row's peak ({', '.join(named)})" if named else "each row's peak"


def row_nominal_peak(row: ResultRow) -> NominalPeak | None:
    """The nominal peak of the row's device in its target's precision (None where none is known)."""
    precision = precision_of_target(row.target)
    return nominal_peak(row.device_name, precision) if precision else None


def nominal_peak_mfu(row: ResultRow) -> float | None:
    """MFU against the chip's nominal peak: the row's own where it divides by it, else its achieved
    TFLOP/s over the table's figure (a row written before the table, or whose peak was given);
    None where the device has no nominal peak, or the figure is below the achieved rate."""
    if row.peak_tflops_source == "nominal":
        return row.mfu
    peak = row_nominal_peak(row)
    if peak is None or row.achieved_tflops is None:
        return None
    return _share(row.achieved_tflops, peak.tflops, "nominal")[0]


def measured_peak_mfu(row: ResultRow) -> float | None:
    """MFU against the matmul chain measured on the row's device: its second column, or, in a row
    written before that column, its MFU where the measured chain was its peak."""
    if row.measured_peak_tflops is not None:
        return row.mfu_of_measured_peak
    return row.mfu if row.peak_tflops_source == "measured" else None


def measured_peak_of(row: ResultRow) -> float | None:
    """The matmul chain measured on the row's device: its own field, or an older row's peak where
    that peak was the measured one."""
    if row.measured_peak_tflops is not None:
        return row.measured_peak_tflops
    return row.peak_tflops if row.peak_tflops_source == "measured" else None
