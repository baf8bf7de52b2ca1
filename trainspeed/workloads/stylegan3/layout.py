"""The per-layer frequency schedule of the StyleGAN3 synthesis network.

Cutoff and stop-band frequencies grow geometrically from the first layer to the last few
(critically sampled) layers; each layer's sampling rate is the smallest power of two above twice
its stop band, its size adds a margin on each side (except the last two, at the image size),
and its channel count falls as the cutoff rises.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainspeed.workloads.stylegan3.configs import StyleGAN3Config

IMAGE_CHANNELS = 3


@dataclass(frozen=True)
class BandSpec:
    """Where one feature map lives: channels, spatial size, sampling rate and filter frequencies."""

    channels: int
    size: int
    sampling_rate: int
    cutoff: float
    half_width: float


@dataclass(frozen=True)
class LayerSpec:
    before: BandSpec
    after: BandSpec
    is_torgb: bool
    is_critically_sampled: bool


def synthesis_bands(config: StyleGAN3Config) -> list[BandSpec]:
    """Bands 0..num_layers: band 0 is the input's, band i the output of layer i (the last is RGB)."""
    n = config.num_layers
    last_cutoff = config.resolution / 2
    last_stopband = last_cutoff * config.last_stopband_rel
    exponents = np.minimum(np.arange(n + 1) / (n - config.num_critical), 1)
    cutoffs = config.first_cutoff * (last_cutoff / config.first_cutoff) ** exponents
    stopbands = config.first_stopband * (last_stopband / config.first_stopband) ** exponents
    sampling_rates = np.exp2(np.ceil(np.log2(np.minimum(stopbands * 2, config.resolution))))
    half_widths = np.maximum(stopbands, sampling_rates / 2) - cutoffs
    sizes = sampling_rates + config.margin_size * 2
    sizes[-2:] = config.resolution
    channels = np.rint(np.minimum((config.g_channel_base / 2) / cutoffs, config.g_channel_max))
    channels[-1] = IMAGE_CHANNELS
    return [
        BandSpec(int(c), int(s), int(r), float(f), float(h))
        for c, s, r, f, h in zip(channels, sizes, sampling_rates, cutoffs, half_widths)
    ]


def synthesis_layers(config: StyleGAN3Config) -> list[LayerSpec]:
    """Layer i maps band max(i - 1, 0) to band i; the input module produces band 0."""
    bands = synthesis_bands(config)
    n = config.num_layers
    return [
        LayerSpec(
            before=bands[max(i - 1, 0)],
            after=bands[i],
            is_torgb=(i == n),
            is_critically_sampled=(i >= n - config.num_critical),
        )
        for i in range(n + 1)
    ]
