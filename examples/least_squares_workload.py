"""Least squares at fixed weights: a workload whose gradient noise scale is known in closed form.

The data are y = w* . x + s e with x ~ N(0, I_d) and e ~ N(0, 1); the model is w . x with the loss
(w . x - y)^2 / 2, held at w = w* + delta (plain SGD at learning rate 0, so the weights never move
and every step samples the same gradient distribution). Per sample the gradient is
g = (delta . x - s e) x, so (Isserlis' theorem for the fourth moments of a Gaussian)

    G = E[g] = delta,      |G|^2 = |delta|^2,
    Sigma = (|delta|^2 + s^2) I + delta delta^T,     tr(Sigma) = d (|delta|^2 + s^2) + |delta|^2,

and B_simple = tr(Sigma) / |G|^2. The size names d; |delta|^2 = 1 and s = 1, so at d = 16 the
noise scale is 33. A run's noise-scale rows can be read against `exact_noise_scale`:

    python examples/least_squares_workload.py lsq.npz --samples 200000 --dimension 16
    trainspeed data from-arrays lsq.npz --out data/lsq
    PYTHONPATH=examples trainspeed train --workload least_squares_workload:LeastSquaresWorkload \\
        --size d16 --data data/lsq --batch-size-per-device 256 --steps 400 --noise-scale-micro-batches 4
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainspeed.data import open_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.data.loader import ShardLoader
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable

DELTA_SQ = 1.0
"""|w - w*|^2: how far the fixed weights are from the optimum."""
NOISE_STD = 1.0
"""s: the standard deviation of the label noise."""
DATA_SEED = 1234


@dataclass(frozen=True)
class Exact:
    grad_sq: float
    trace_sigma: float

    @property
    def b_simple(self) -> float:
        return self.trace_sigma / self.grad_sq


def dimension(size: str) -> int:
    if not size.startswith("d") or not size[1:].isdigit() or int(size[1:]) < 1:
        raise UsageError(f"least squares: size {size!r}: give d<dimension>, e.g. d16")
    return int(size[1:])


def exact_noise_scale(size: str) -> Exact:
    d = dimension(size)
    return Exact(grad_sq=DELTA_SQ, trace_sigma=d * (DELTA_SQ + NOISE_STD**2) + DELTA_SQ)


def optimum(d: int) -> torch.Tensor:
    """w*, the same for the data and the model (a fixed draw)."""
    return torch.randn(d, generator=torch.Generator().manual_seed(DATA_SEED))


def samples(d: int, count: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    x = torch.randn(count, d, generator=generator)
    y = x @ optimum(d) + NOISE_STD * torch.randn(count, generator=generator)
    return {"x": x, "y": y}


class LeastSquaresTrainable(Trainable):
    def __init__(self, d: int) -> None:
        model = nn.Linear(d, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(optimum(d) + (DELTA_SQ / d) ** 0.5)  # |delta|^2 = d * (DELTA_SQ / d)
        super().__init__({"model": model})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"model": torch.optim.SGD(self.networks["model"].parameters(), lr=0.0)}

    def _loss(self, network: nn.Module, batch: Batch) -> torch.Tensor:
        return 0.5 * (network(batch["x"]).squeeze(1) - batch["y"]).pow(2).mean()

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = self._loss(self.wrapped["model"], batch)
        loss.backward()
        self.optimizers["model"].step()
        self.optimizers["model"].zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        count = batch["y"].numel()
        return {"loss_sum": self._loss(self.networks["model"], batch) * count,
                "count": torch.tensor(float(count), device=batch["y"].device)}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"loss": float(totals["loss_sum"]) / float(totals["count"])}


class LeastSquaresWorkload:
    name = "least-squares"
    version = "1"
    sizes = ("d4", "d16", "d64")
    default_size = "d16"
    reference_batch = None
    """The learning rate is 0 at every batch."""

    def build(self, size: str, seed: int = 0) -> LeastSquaresTrainable:
        return LeastSquaresTrainable(dimension(size))

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        return samples(dimension(size), batch_size, generator)

    def flops_per_sample(self, size: str) -> float:
        return 6.0 * dimension(size)

    def open_dataset(self, path: str, size: str, config: LoaderConfig) -> ShardLoader:
        loader = open_dataset(path, config, outputs=("x", "y"))
        dtype, shape = loader.spec.schema.columns["x"]
        if shape != (dimension(size),):
            raise UsageError(f"{path}: x has shape {shape}; size {size} trains on {dimension(size)} inputs per sample")
        return loader


def main() -> None:
    parser = argparse.ArgumentParser(description="Write least-squares samples for trainspeed data from-arrays.")
    parser.add_argument("out", type=Path, help=".npz file to write")
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--dimension", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    columns = samples(args.dimension, args.samples, torch.Generator().manual_seed(args.seed))
    np.savez(args.out, **{name: tensor.numpy().astype(np.float32) for name, tensor in columns.items()})
    print(f"{args.out}: {args.samples} samples of dimension {args.dimension}; exact B_simple "
          f"{exact_noise_scale(f'd{args.dimension}').b_simple:g}")


if __name__ == "__main__":
    main()
