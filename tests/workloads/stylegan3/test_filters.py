"""Low-pass filter design: unit DC gain, symmetry, and the response the Kaiser design promises."""

from __future__ import annotations

import numpy as np
import pytest

from trainspeed.workloads.stylegan3.filters import design_lowpass_filter, kaiser_beta


def response(taps: np.ndarray, frequency: float, fs: float) -> float:
    """Magnitude of the 1-D filter's frequency response at `frequency`."""
    n = np.arange(len(taps)) - (len(taps) - 1) / 2
    return float(abs(np.sum(taps * np.exp(-2j * np.pi * frequency / fs * n))))


def test_single_tap_means_no_filter():
    assert design_lowpass_filter(1, cutoff=4, width=2, fs=16) is None


@pytest.mark.parametrize("numtaps", [12, 24])
def test_separable_filter_passes_dc_halves_at_cutoff_and_stops_beyond(numtaps):
    fs, cutoff, width = 64.0, 8.0, 16.0
    taps = design_lowpass_filter(numtaps, cutoff=cutoff, width=width, fs=fs).double().numpy()
    assert taps.ndim == 1 and np.allclose(taps, taps[::-1])
    assert np.isclose(taps.sum(), 1.0)
    assert abs(response(taps, cutoff, fs) - 0.5) < 0.05  # a windowed sinc is -6 dB at its cutoff
    stopband = np.linspace(cutoff + width / 2 + 2, fs / 2, 20)
    assert max(response(taps, f, fs) for f in stopband) < 0.05


def test_radial_filter_is_symmetric_with_unit_dc_gain():
    taps = design_lowpass_filter(12, cutoff=8.0, width=16.0, fs=64.0, radial=True).double().numpy()
    assert taps.shape == (12, 12)
    assert np.isclose(taps.sum(), 1.0)
    assert np.allclose(taps, taps.T) and np.allclose(taps, taps[::-1, ::-1])


def test_kaiser_beta_regimes():
    assert kaiser_beta(10) == 0.0
    assert kaiser_beta(60) == pytest.approx(0.1102 * (60 - 8.7))
    assert 0 < kaiser_beta(30) < kaiser_beta(60)
