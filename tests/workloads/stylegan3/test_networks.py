"""Generator and discriminator: the published sizes, output shapes, translation equivariance."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.discriminator import Discriminator, minibatch_stddev
from trainspeed.workloads.stylegan3.generator import Generator
from trainspeed.workloads.stylegan3.layout import synthesis_layers


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_t256_has_the_published_parameter_counts():
    config = get_config("t256")
    with torch.device("meta"):
        discriminator = Discriminator(config)
    assert parameter_count(Generator(config)) == 28_472_133
    assert parameter_count(discriminator) == 28_864_129


def test_t256_layout_is_14_layers_plus_torgb_from_a_36px_input():
    layers = synthesis_layers(get_config("t256"))
    assert len(layers) == 15 and layers[-1].is_torgb and not layers[-2].is_torgb
    assert layers[0].before.size == 36 and layers[0].before.sampling_rate == 16
    assert [layer.after.size for layer in layers[-3:]] == [276, 256, 256]
    assert layers[-1].after.channels == 3


def test_r_config_uses_1x1_convs_and_radial_filters_before_the_critical_layers():
    generator = Generator(get_config("tiny-r"))
    convs = {layer.weight.shape[-1] for layer in generator.synthesis.layers}
    assert convs == {1}
    down_filter_dims = [layer.down_filter.ndim for layer in generator.synthesis.layers if layer.down_filter is not None]
    assert 2 in down_filter_dims and down_filter_dims[-1] == 1  # critically sampled layers stay separable


@pytest.mark.parametrize("size", ["tiny-t", "tiny-r"])
def test_generator_and_discriminator_shapes(size):
    config = get_config(size)
    torch.manual_seed(0)
    generator, discriminator = Generator(config), Discriminator(config)
    images = generator(torch.randn(4, config.z_dim))
    assert images.shape == (4, 3, 32, 32) and images.dtype == torch.float32
    assert torch.isfinite(images).all() and 0.01 < images.std() < 2
    assert discriminator(images).shape == (4,)


def test_magnitude_emas_move_only_when_asked():
    config = get_config("tiny-t")
    generator = Generator(config)
    z = torch.randn(4, config.z_dim)
    generator(z)
    assert all(layer.magnitude_ema.item() == 1.0 for layer in generator.synthesis.layers)
    assert generator.mapping.w_avg.abs().sum() == 0
    generator(z, magnitude_ema_beta=0.5)
    assert all(layer.magnitude_ema.item() != 1.0 for layer in generator.synthesis.layers)
    assert generator.mapping.w_avg.abs().sum() > 0


def test_minibatch_stddev_appends_the_group_spread():
    x = torch.zeros(4, 2, 3, 3)
    x[1] = 2.0  # groups are samples {0, 2} and {1, 3}: the second group has spread 1
    out = minibatch_stddev(x, group_size=2)
    assert out.shape == (4, 3, 3, 3)
    torch.testing.assert_close(out[:, 2, 0, 0], torch.tensor([1e-4, 1.0, 1e-4, 1.0]), atol=1e-4, rtol=1e-4)
    assert minibatch_stddev(torch.randn(6, 2, 3, 3), group_size=4).shape == (6, 3, 3, 3)  # group 3 divides 6


EQUIVARIANCE_TOLERANCE = 1e-6
"""Relative MSE (error energy / image energy) inside the crop; ~60 dB. Measured: ~5e-10."""
CROP = 4


def _relative_error(moved: torch.Tensor, base: torch.Tensor, dx: int, dy: int) -> float:
    height, width = base.shape[-2:]
    a = moved[..., CROP + dy : height - CROP, CROP + dx : width - CROP]
    b = base[..., CROP : height - CROP - dy, CROP : width - CROP - dx]
    return float((a - b).square().mean() / b.square().mean())


@pytest.mark.parametrize("dx,dy", [(1, 0), (0, 2), (3, 1)])
def test_t_generator_is_translation_equivariant_for_whole_pixel_shifts(dx, dy):
    config = get_config("tiny-t")
    torch.manual_seed(1)
    generator = Generator(config)
    ws = generator.mapping(torch.randn(2, config.z_dim))
    with torch.no_grad():
        base = generator.synthesis(ws)
        moved = generator.synthesis(ws, translate=torch.tensor([dx, dy]) / config.resolution)
    assert _relative_error(moved, base, dx, dy) < EQUIVARIANCE_TOLERANCE
    # the comparison can fail: unshifted crops of the moved image differ from the original
    assert _relative_error(moved, base, 0, 0) > 1e-3


def test_matmul_resampling_gives_the_same_generator():
    config = get_config("tiny-t")
    torch.manual_seed(2)
    direct = Generator(config)
    matmul = Generator(dataclasses.replace(config, fir_matmul=True))
    matmul.load_state_dict(direct.state_dict())
    z = torch.randn(2, config.z_dim)
    torch.testing.assert_close(matmul(z), direct(z), rtol=1e-4, atol=1e-5)
