"""channels_last changes the memory order of StyleGAN3's tensors, never their values."""

from __future__ import annotations

import dataclasses

import torch

from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.discriminator import DiscriminatorBlock
from trainspeed.workloads.stylegan3.generator import SynthesisLayer
from trainspeed.workloads.stylegan3.loss import discriminator_loss, generator_loss
from trainspeed.workloads.stylegan3.trainable import images_to_float
from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload, build_trainable, counted_flops_per_image

CHANNELS_LAST = torch.channels_last


def _trainable(channels_last: bool):
    config = dataclasses.replace(get_config("tiny-t"), channels_last=channels_last)
    return build_trainable(config, seed=0).to(torch.device("cpu"))


def _losses_and_grads(trainable, real: torch.Tensor):
    """G's loss and D's loss with every gradient of G and D (one forward/backward each, no update)."""
    generator, discriminator = trainable.networks["G"], trainable.networks["D"]
    z = torch.randn(real.shape[0], trainable.config.z_dim, generator=torch.Generator().manual_seed(3))
    g_loss = generator_loss(discriminator(generator(z)))
    g_grads = torch.autograd.grad(g_loss, list(generator.parameters()))
    d_loss = discriminator_loss(discriminator(generator(z).detach()), discriminator(real))
    d_grads = torch.autograd.grad(d_loss, list(discriminator.parameters()))
    return (g_loss, d_loss), g_grads + d_grads


def test_channels_last_gives_the_same_losses_and_gradients():
    batch = StyleGAN3Workload().synthetic_batch("tiny-t", 2, torch.Generator().manual_seed(0))
    real = images_to_float(batch["images"])
    plain_losses, plain_grads = _losses_and_grads(_trainable(False), real)
    last_losses, last_grads = _losses_and_grads(_trainable(True), real.contiguous(memory_format=CHANNELS_LAST))
    for a, b in zip(last_losses, plain_losses):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(last_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_channels_last_feature_maps_and_weights_stay_channels_last():
    trainable = _trainable(True)
    formats = {}

    def record(module, args, out):
        formats.setdefault(type(module).__name__, []).append(out.is_contiguous(memory_format=CHANNELS_LAST))

    for network in (trainable.networks["G"], trainable.networks["D"]):
        for module in network.modules():
            if isinstance(module, (SynthesisLayer, DiscriminatorBlock)):
                module.register_forward_hook(record)
    batch = StyleGAN3Workload().synthetic_batch("tiny-t", 2, torch.Generator().manual_seed(0))
    trainable.setup_optimizers()
    trainable.step = 1  # no R1: only the phases that are timed
    trainable.train_step(batch)
    assert formats and all(all(flags) for flags in formats.values()), formats
    conv_weights = [p for name in ("G", "D") for p in trainable.networks[name].parameters() if p.ndim == 4]
    assert conv_weights and all(p.is_contiguous(memory_format=CHANNELS_LAST) for p in conv_weights)
    # the default keeps the usual order
    plain = _trainable(False)
    assert all(p.is_contiguous() for p in plain.networks["G"].parameters())


def test_flop_count_ignores_memory_order_and_kernels():
    workload = StyleGAN3Workload()
    base = get_config("tiny-t")
    variants = [dataclasses.replace(base, channels_last=True), dataclasses.replace(base, lrelu_kernel="triton")]
    assert all(counted_flops_per_image(v) == workload.flops_per_sample("tiny-t") for v in variants)
