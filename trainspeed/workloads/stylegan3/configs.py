"""Named StyleGAN3 configurations: the published T and R architectures and tiny ones for tests.

The T (translation-equivariant) and R (rotation-equivariant) configs share one generator; R uses
1x1 convolutions, doubled generator channels and radially symmetric downsampling filters.
Training hyperparameters are the published defaults for the resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from trainspeed.errors import UsageError

Recompute = Literal["none", "activation", "layer"]
LreluKernel = Literal["plain", "triton"]


@dataclass(frozen=True)
class StyleGAN3Config:
    name: str
    resolution: int
    architecture: Literal["T", "R"] = "T"
    # mapping network
    z_dim: int = 512
    w_dim: int = 512
    mapping_layers: int = 2
    # synthesis network
    g_channel_base: int = 32768
    g_channel_max: int = 512
    num_layers: int = 14
    num_critical: int = 2
    conv_kernel: int = 3
    radial_filters: bool = False
    first_cutoff: float = 2.0
    first_stopband: float = 2**2.1
    last_stopband_rel: float = 2**0.3
    margin_size: int = 10
    filter_size: int = 6
    lrelu_upsampling: int = 2
    output_scale: float = 0.25
    conv_clamp: float | None = 256.0
    # discriminator (StyleGAN2 ResNet)
    d_channel_base: int = 32768
    d_channel_max: int = 512
    mbstd_group_size: int = 4
    # training
    g_lr: float = 0.0025
    d_lr: float = 0.002
    r1_gamma: float = 2.0
    r1_interval: int = 16
    ema_kimg_per_32_images: float = 10.0
    magnitude_ema_half_life_images: float = 20_000.0
    # memory/speed trade-offs (same maths either way)
    recompute: Recompute = "activation"
    """'activation': filtered leaky ReLU re-run in backward (its 4x upsampled intermediates are not
    kept); 'layer': the whole synthesis layer re-runs (only layer inputs are kept); 'none'."""
    grouped_modconv: bool = False
    fir_matmul: bool = False
    """Resample the filtered leaky ReLU's separable filters as matmuls instead of depthwise convs."""
    channels_last: bool = False
    """Keep images, feature maps and convolution weights in channels-last memory order (NHWC).
    cuDNN runs convolutions fastest in that order, depthwise ones included: a bf16 NCHW depthwise
    convolution (the FIR filters) falls back to PyTorch's own kernels instead. Same values."""
    lrelu_kernel: LreluKernel = "plain"
    """'triton': the filtered leaky ReLU runs as one fused Triton kernel each way (triton_lrelu.py;
    a 2-bit sign mask is kept for backward instead of recomputing the upsampled maps) where
    Triton and a CUDA device are present and the filters are separable; elsewhere the plain ops
    run. The trainable says which ran (`lrelu_path`)."""

    @property
    def num_ws(self) -> int:
        """Latents the synthesis network consumes: one for the input, one per layer, one for ToRGB."""
        return self.num_layers + 2


def _published(name: str, resolution: int, architecture: Literal["T", "R"], **overrides) -> StyleGAN3Config:
    config = StyleGAN3Config(name=name, resolution=resolution, architecture=architecture, **overrides)
    if architecture == "R":
        config = replace(
            config,
            conv_kernel=1,
            radial_filters=True,
            g_channel_base=config.g_channel_base * 2,
            g_channel_max=config.g_channel_max * 2,
        )
    return config


_TINY = dict(
    z_dim=64,
    w_dim=64,
    g_channel_base=1024,
    g_channel_max=32,
    num_layers=6,
    d_channel_base=1024,
    d_channel_max=64,
    r1_gamma=0.1,
    g_lr=0.0025,
    d_lr=0.002,
)

_SMALL = dict(
    z_dim=256,
    w_dim=256,
    g_channel_base=8192,
    g_channel_max=128,
    num_layers=10,
    d_channel_base=8192,
    d_channel_max=256,
    r1_gamma=0.5,
)

CONFIGS: dict[str, StyleGAN3Config] = {
    config.name: config
    for config in (
        _published("tiny-t", 32, "T", **_TINY),
        _published("tiny-r", 32, "R", **_TINY),
        _published("small-t64", 64, "T", **_SMALL),
        _published("small-t128", 128, "T", **_SMALL),
        _published("t256", 256, "T"),
        _published("r256", 256, "R"),
        _published("t1024", 1024, "T", r1_gamma=32.0),
    )
}


SWITCHES: dict[str, dict[str, object]] = {
    "channels-last": {"channels_last": True},
    "triton-lrelu": {"lrelu_kernel": "triton"},
    "fir-matmul": {"fir_matmul": True},
    "grouped": {"grouped_modconv": True},
    **{f"recompute-{mode}": {"recompute": mode} for mode in ("none", "activation", "layer")},
}
"""Speed and memory switches by name, written after a size: `t256+channels-last+triton-lrelu`."""


def get_config(name: str) -> StyleGAN3Config:
    """A named size, optionally followed by switches joined by `+`."""
    size, *switches = name.split("+")
    if size not in CONFIGS:
        raise UsageError(f"unknown StyleGAN3 size {name!r}: choose one of {', '.join(CONFIGS)}, optionally with +switches")
    config = CONFIGS[size]
    for switch in switches:
        if switch not in SWITCHES:
            raise UsageError(f"StyleGAN3 size {name!r}: unknown switch {switch!r}; choose from {', '.join(SWITCHES)}")
        config = replace(config, **SWITCHES[switch])
    return config
