"""Low-pass FIR filter design for the alias-free layers (Kaiser-windowed sinc and jinc).

Written from the textbook formulas so the package needs no SciPy: the Kaiser window's shape
parameter follows Kaiser's empirical attenuation formula for a given transition width.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def kaiser_attenuation(numtaps: int, relative_width: float) -> float:
    """Stop-band attenuation (dB) reachable with `numtaps` taps and a transition band of
    `relative_width` (a fraction of the Nyquist frequency)."""
    return 2.285 * (numtaps - 1) * math.pi * relative_width + 7.95


def kaiser_beta(attenuation: float) -> float:
    if attenuation > 50:
        return 0.1102 * (attenuation - 8.7)
    if attenuation > 21:
        return 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21)
    return 0.0


def design_lowpass_filter(
    numtaps: int, cutoff: float, width: float, fs: float, radial: bool = False
) -> torch.Tensor | None:
    """A unit-DC-gain low-pass filter: 1-D (separable) or 2-D radially symmetric; None for 1 tap.

    `cutoff` and `width` (the transition band) are in the same units as the sampling rate `fs`.
    """
    if numtaps < 1:
        raise ValueError(f"numtaps must be >= 1, got {numtaps}")
    if numtaps == 1:
        return None
    nyquist = fs / 2
    beta = kaiser_beta(kaiser_attenuation(numtaps, width / nyquist))
    window = np.kaiser(numtaps, beta)
    if not radial:
        offsets = np.arange(numtaps) - (numtaps - 1) / 2
        relative_cutoff = cutoff / nyquist
        taps = relative_cutoff * np.sinc(relative_cutoff * offsets) * window
        return torch.as_tensor(taps / taps.sum(), dtype=torch.float32)
    positions = (np.arange(numtaps) - (numtaps - 1) / 2) / fs
    radius = torch.as_tensor(np.hypot(*np.meshgrid(positions, positions)), dtype=torch.float64)
    # jinc: the 2-D ideal disc low-pass; its value at r = 0 is the limit `cutoff`.
    safe_radius = torch.where(radius > 0, radius, torch.ones_like(radius))
    jinc = torch.special.bessel_j1(2 * math.pi * cutoff * safe_radius) / (math.pi * safe_radius)
    jinc = torch.where(radius > 0, jinc, torch.full_like(radius, cutoff))
    taps2d = jinc.numpy() * np.outer(window, window)
    return torch.as_tensor(taps2d / taps2d.sum(), dtype=torch.float32)
