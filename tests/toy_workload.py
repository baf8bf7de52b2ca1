"""The one workload the tests define, as a user writes one (docs/workloads.md): a linear classifier
of a few features whose label is the largest of its first `classes` features (a rule it can learn),
trained with SGD. Small enough that a step costs nothing; a real network, optimizer and dataset.

Each thing a test needs of it is a setting of `ToyWorkload`, named here as a factory, so that the
CLI, a port check or a child process names it `toy_workload:FACTORY` (the test session has tests/
on its path; a child gets it on PYTHONPATH: `child_commands.TESTS`): sizes named as no built-in
names them, a step that reads its loss, a batch that shrinks, an op XLA runs on the host, a FLOP
count off by 8%, and factories that go wrong as a user's can. This module imports trainspeed only,
so a copy of it elsewhere is a workload of its own (another definition under the same name).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.data import open_dataset, write_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.workloads.base import Batch, Trainable

FEATURES, CLASSES = 8, 4
SIZES = {"tiny": FEATURES}
"""Size name -> features. The label is among the first CLASSES features, so every size has at least that many."""
LEARNING_RATE = 0.1


@dataclass(frozen=True)
class StepHabits:
    """What a step does besides the plain one: each a thing a port to a device trips on."""

    reads_loss: bool = False
    """Reads its loss on the host every step, as a logging line does (a host sync; no meta device)."""
    shrinks_from_step: int | None = None
    """From this step on, each step drops one more sample (down to one): every step has new shapes."""
    class_weights: Literal["bincount", "int-histogram"] | None = None
    """Weighs each class by its inverse frequency in the batch, counted with torch.bincount (an op
    torch_xla runs on the host) or an integer torch.histc (on the host, whose kernel refuses integers)."""


class ToyClassifier(Trainable):
    def __init__(self, features: int, classes: int, seed: int, habits: StepHabits = StepHabits()) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            network = nn.Linear(features, classes)
        super().__init__({"net": network})
        self.classes, self.habits = classes, habits
        self.logged: list[float] = []
        self.steps = 0

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=LEARNING_RATE)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        self.steps += 1
        if self.habits.shrinks_from_step is not None and self.steps >= self.habits.shrinks_from_step:
            dropped = min(self.steps - self.habits.shrinks_from_step + 1, len(batch["y"]) - 1)
            batch = {key: value[dropped:] for key, value in batch.items()}
        weight = None
        if self.habits.class_weights == "bincount":
            counts = torch.bincount(batch["y"], minlength=self.classes)
            weight = 1.0 / counts.clamp(min=1).float()
        elif self.habits.class_weights == "int-histogram":
            histogram = torch.histc(batch["y"].int(), bins=self.classes, min=0, max=self.classes - 1)
            weight = 1.0 / histogram.clamp(min=1).float()
        loss = functional.cross_entropy(self.wrapped["net"](batch["x"]), batch["y"], weight=weight)
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        if self.habits.reads_loss:
            self.logged.append(loss.item())
        return loss.detach()


class BeforeFusedClassifier(ToyClassifier):
    """Written before `setup_optimizers` took `fused` (the protocol's documented change)."""

    def setup_optimizers(self) -> None:  # type: ignore[override]
        self.optimizers = {"net": torch.optim.SGD(self.networks["net"].parameters(), lr=LEARNING_RATE)}


class AdamWClassifier(ToyClassifier):
    """Trains with AdamW: an optimizer with state (moments and a step count) that a resume restores."""

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.AdamW(self.networks["net"].parameters(), lr=LEARNING_RATE / 10)}


class ValidatedClassifier(ToyClassifier):
    """Measures its accuracy on the validation split, so a run can train to a goal."""

    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            predicted = self.wrapped["net"](batch["x"]).argmax(dim=1)
        return {"correct": (predicted == batch["y"]).sum().float(), "count": torch.tensor(float(len(batch["y"])))}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        return {"accuracy": float(totals["correct"]) / max(1.0, float(totals["count"]))}


def labelled(inputs: torch.Tensor) -> Batch:
    """A batch of these inputs with the label the classifier learns."""
    return {"x": inputs, "y": inputs[:, :CLASSES].argmax(dim=1)}


class Float64Loader:
    """A loader of the toy's batches whose inputs are float64, where its synthetic batch (and so a
    server) has float32."""

    def __init__(self, features: int, config: LoaderConfig) -> None:
        self.features, self.config, self.epoch = features, config, 0

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.epoch)
        for _ in range(len(self)):
            yield labelled(torch.randn(self.config.batch_size, self.features, generator=generator, dtype=torch.float64))

    def __len__(self) -> int:
        return 4

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": 0}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = state["epoch"]

    @property
    def num_samples(self) -> int:
        return 4 * self.config.batch_size * self.config.world_size


class ToyWorkload:
    """The toy; its settings are what a test needs of it (the factories below name them)."""

    def __init__(self, name: str = "toy", sizes: dict[str, int] | None = None, *, default_size: str | None = None,
                 habits: StepHabits = StepHabits(), trainable: type[ToyClassifier] = ToyClassifier,
                 declared_flops_factor: float = 1.0, flops_counted_with_a_backward: bool = False,
                 float64_loader: bool = False, reads_tokens: bool = False) -> None:
        self.name = name
        self.features = dict(sizes or SIZES)
        self.sizes = tuple(self.features)
        if default_size is not None:  # without one, the first size is the default
            self.default_size = default_size
        self.habits, self.trainable = habits, trainable
        self.declared_flops_factor = declared_flops_factor
        self.flops_counted_with_a_backward = flops_counted_with_a_backward
        self.float64_loader = float64_loader
        self.reads_tokens = reads_tokens

    def build(self, size: str, seed: int = 0) -> ToyClassifier:
        return self.trainable(self.features[size], CLASSES, seed, self.habits)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        return labelled(torch.randn(batch_size, self.features[size], generator=generator))

    def flops_per_sample(self, size: str) -> float:
        if self.flops_counted_with_a_backward:  # as StyleGAN3's count does: autograd runs before any step
            network = nn.Linear(self.features[size], CLASSES)
            with FlopCounterMode(display=False) as counter:
                network(torch.randn(2, self.features[size])).sum().backward()
            return counter.get_total_flops() / 2
        return self.declared_flops_factor * exact_flops(self.features[size])

    def open_dataset(self, path: str, size: str, config: LoaderConfig):
        if self.float64_loader:
            return Float64Loader(self.features[size], config)
        if self.reads_tokens:
            return token_loader(path, self.features[size], config)
        return open_dataset(path, config, outputs=("x", "y"))


def token_loader(path: str, features: int, config: LoaderConfig):
    """A token file (or any token data read where it lies) as the toy's batches: each window of
    `features` ids, scaled, is a sample's inputs, labelled by the toy's rule."""
    from trainspeed.data.in_place import open_tokens
    from trainspeed.data.mapped import MappedLoader

    opened = open_tokens(path, config, features)
    return MappedLoader(opened.loader, lambda batch: labelled(batch["tokens"].float() / 128.0 - 1.0))


def exact_flops(features: int) -> float:
    """Per sample: the forward matmul and the weight gradient (the input needs no gradient)."""
    return 4.0 * features * CLASSES


def write_toy_data(out: Path, samples: int = 256) -> Path:
    """A dataset of the toy's batches, as `trainspeed data from-arrays` writes one."""
    inputs = np.random.default_rng(0).standard_normal((samples, FEATURES)).astype(np.float32)
    write_dataset({"x": inputs, "y": inputs[:, :CLASSES].argmax(axis=1).astype(np.int64)}, out, val_fraction=0.1)
    return out


# --- sizes, protocol versions and loaders as a user's workload has them ---------------------------
OWN_SIZES = {"narrow": 4, "wide": 8}


def own_sizes() -> ToyWorkload:
    """Sizes named as no built-in names them, no `default_size` (so the first is the default), and a
    size lookup that raises KeyError for any other name, as a dict lookup in a user's code does."""
    return ToyWorkload("own-sizes", OWN_SIZES)


def wide_by_default() -> ToyWorkload:
    return ToyWorkload("own-sizes", OWN_SIZES, default_size="wide")


def before_fused() -> ToyWorkload:
    return ToyWorkload("before-fused", OWN_SIZES, trainable=BeforeFusedClassifier)


def validated() -> ToyWorkload:
    """Validates its accuracy: a run of it trains to a goal (`--until val/accuracy>=...`)."""
    return ToyWorkload("validated", trainable=ValidatedClassifier)


def with_adamw() -> ToyWorkload:
    """The toy with optimizer state: what `kill -9` and `--resume` must carry over on every target."""
    return ToyWorkload("adamw", trainable=AdamWClassifier)


def token_windows() -> ToyWorkload:
    """Validates its accuracy on windows of a token file read where it lies (`token_loader`)."""
    return ToyWorkload("token-windows", trainable=ValidatedClassifier, reads_tokens=True)


def float64_data() -> ToyWorkload:
    return ToyWorkload("wide-data", OWN_SIZES, float64_loader=True)


# --- factories that go wrong as a user's can -------------------------------------------------------
def raising_factory():
    raise RuntimeError("cannot find the weights of my model")


def none_factory():
    return None


def misnamed_sizes() -> ToyWorkload:
    workload = own_sizes()
    workload.sizes = "narrow"  # type: ignore[assignment]
    return workload


not_a_factory = 3


# --- steps a device or the FLOP check trips on ------------------------------------------------------
def loss_reading() -> ToyWorkload:
    return ToyWorkload("loss-reading", habits=StepHabits(reads_loss=True))


def shrinking() -> ToyWorkload:
    """New shapes from the first step on."""
    return ToyWorkload("shrinking-batch", habits=StepHabits(shrinks_from_step=1))


def shrinking_after_the_warmup() -> ToyWorkload:
    """New shapes from step 4 on: after the bench's first step, one warm-up step and its probe step,
    so the compiler has settled before the timed windows and recompiles inside them."""
    return ToyWorkload("shape-shifting", habits=StepHabits(shrinks_from_step=4))


def class_weighted() -> ToyWorkload:
    return ToyWorkload("class-weighted", habits=StepHabits(class_weights="bincount"))


def int_histogram() -> ToyWorkload:
    return ToyWorkload("int-histogram", habits=StepHabits(class_weights="int-histogram"))


def overstated_flops() -> ToyWorkload:
    """Declares 8% more FLOPs than its step has, as a user's formula may."""
    return ToyWorkload("overstated", declared_flops_factor=1.08)


def flops_counted_with_a_backward() -> ToyWorkload:
    return ToyWorkload("backward-flops", flops_counted_with_a_backward=True)
