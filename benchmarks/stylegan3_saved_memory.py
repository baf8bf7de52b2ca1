"""Activation memory StyleGAN3 keeps for backward, per phase, at any size and batch, without a GPU.

    .venv/bin/python benchmarks/stylegan3_saved_memory.py [--cases t256:32,t256:8] \
        [--variants none,activation] [--out results/stylegan3_saved_memory.jsonl]

The step runs on meta tensors (shapes only, no compute), and every tensor autograd saves for
backward is recorded once per storage. That is the activation memory a device holds at the end of
each phase's forward pass, in float32; under bf16 autocast the conv activations are half that.
It does not include the transient peak inside backward (a recomputed layer's intermediates, the
gradients in flight) nor weights and Adam state (about 1 GiB at T-256), so it is a lower bound of
the device's peak, useful to compare variants and batch sizes before renting the device.
The 'layer' variant is not measured here: its checkpoints keep their inputs outside autograd.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from trainspeed.bench.measurement import MeasurementRow
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.discriminator import Discriminator
from trainspeed.workloads.stylegan3.generator import Generator
from trainspeed.workloads.stylegan3.loss import discriminator_loss, generator_loss

GIB = 2**30


@dataclass(frozen=True)
class SavedMemoryRow:
    size: str
    batch_size: int
    variant: str
    g_main_saved_gib: float
    """G forward + D forward on the fakes (the G update), float32."""
    d_main_saved_gib: float
    """D forward on fakes and reals (the D update), float32."""


class SavedBytes:
    """Sum of the bytes of distinct storages autograd saves inside the context."""

    def __init__(self) -> None:
        self.storages: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        self.storages[storage._cdata] = storage.nbytes()  # _cdata: the storage's identity (meta has no address)
        return tensor

    def __enter__(self) -> "SavedBytes":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    @property
    def gib(self) -> float:
        return sum(self.storages.values()) / GIB


def measure(size: str, batch_size: int, variant: str) -> SavedMemoryRow:
    config = dataclasses.replace(get_config(size), recompute=variant)
    generator, discriminator = Generator(config).to("meta"), Discriminator(config).to("meta")
    z = torch.randn(batch_size, config.z_dim, device="meta")
    real = torch.randn(batch_size, 3, config.resolution, config.resolution, device="meta")

    discriminator.requires_grad_(False)
    with SavedBytes() as g_main:
        loss = generator_loss(discriminator(generator(z)))
    del loss
    discriminator.requires_grad_(True)
    with torch.no_grad():
        fake = generator(z)
    with SavedBytes() as d_main:
        loss = discriminator_loss(discriminator(fake), discriminator(real))
    del loss
    return SavedMemoryRow(size, batch_size, variant, round(g_main.gib, 3), round(d_main.gib, 3))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="t256:4,t256:8,t256:32")
    parser.add_argument("--variants", default="none,activation")
    parser.add_argument("--out", type=Path, default=Path("results/stylegan3_saved_memory.jsonl"))
    args = parser.parse_args(argv)
    command = shlex.join(["python", "benchmarks/stylegan3_saved_memory.py", *(sys.argv[1:] if argv is None else argv)])
    for case in args.cases.split(","):
        size, _, batch = case.partition(":")
        for variant in args.variants.split(","):
            row = measure(size, int(batch), variant)
            append_row(args.out, MeasurementRow.of("stylegan3-saved-memory", row, command, Machine.at_start()))
            print(f"{size:>8} b={row.batch_size:<3} {variant:<10} G main {row.g_main_saved_gib:7.2f} GiB  D main {row.d_main_saved_gib:7.2f} GiB (fp32)")


if __name__ == "__main__":
    main()
