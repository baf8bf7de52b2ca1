"""Image classifiers built from a library by name (`timm:resnet50`, `torchvision:resnet18`).

What is trained is the library's model as its own training scripts train it: cross-entropy on
class labels, SGD with Nesterov momentum (timm's and torchvision's reference recipe; `opt=adamw`
for transformers), batches of 8-bit RGB images that the network itself normalizes with the mean and
standard deviation of the model's pretrained configuration, so the host ships uint8 (a quarter of
the bytes of float32) and the normalization is part of the timed, compiled step.

Sizes (`sizing.py`): presets `tiny` (64 px, 10 classes: a CPU-sized step of the same network) and
`base` (the model's own input size, 1,000 classes), with overrides `res`, `classes` and `opt`
(the learning rate is the trainer's `--lr`).
Each size is checked by building the network and running it (on the meta device where it can,
within a time limit: `trainspeed.workloads.meta`) before anything else runs, so a resolution the
model cannot take (a ViT's patch grid) is one line, and a model that cannot be built at a size
says so. FLOPs per sample are counted
with torch's formulas on one training step (`trainspeed.workloads.flops`), never hand-written.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.data.base import Batch, LoaderConfig
from trainspeed.data.mapped import MappedLoader
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Trainable
from trainspeed.workloads.meta import device_of
from trainspeed.workloads.named.counting import CountedFlops
from trainspeed.workloads.named.library import check_size, first_line
from trainspeed.workloads.named.sizing import (SizeValue, closest, parse_size, require_choice, require_positive_int,
                                               shown)

PRESETS: dict[str, dict[str, SizeValue]] = {
    "tiny": {"res": 64, "classes": 10, "opt": "sgd"},
    "base": {"classes": 1000, "opt": "sgd"},
}
"""`base` takes its resolution from the model (`default_resolution`)."""
OPTIMIZERS = ("sgd", "adamw")
LEARNING_RATES = {"sgd": 0.1, "adamw": 1e-3}
"""At REFERENCE_BATCH: Goyal et al.'s 0.1 per 256 for SGD; DeiT's 5e-4 per 512 for AdamW."""
WEIGHT_DECAY = {"sgd": 1e-4, "adamw": 0.05}
REFERENCE_BATCH = 256
KEYS = ("res", "classes", "opt")
CHECK_BATCH = 2


@dataclass(frozen=True)
class ClassifierSize:
    resolution: int
    classes: int
    optimizer: str
    learning_rate: float


class NormalizedClassifier(nn.Module):
    """The library's network behind the normalization its pretrained configuration expects."""

    def __init__(self, model: nn.Module, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1) * 255.0, persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1) * 255.0, persistent=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        output = self.model((images.float() - self.mean) / self.std)
        return getattr(output, "logits", output)  # torchvision's Inception and GoogLeNet return a tuple in training


class ClassifierTrainable(Trainable):
    def __init__(self, network: NormalizedClassifier, size: ClassifierSize) -> None:
        super().__init__({"classifier": network})
        self.size = size

    def setup_optimizers(self, fused: bool = False) -> None:
        parameters = self.networks["classifier"].parameters()
        decay = WEIGHT_DECAY[self.size.optimizer]
        if self.size.optimizer == "sgd":
            optimizer = torch.optim.SGD(parameters, lr=self.size.learning_rate, momentum=0.9, nesterov=True,
                                        weight_decay=decay, fused=fused or None)
        else:
            optimizer = torch.optim.AdamW(parameters, lr=self.size.learning_rate, weight_decay=decay, fused=fused or None)
        self.optimizers = {"classifier": optimizer}

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = F.cross_entropy(self.wrapped["classifier"](batch["images"]), batch["labels"])
        loss.backward()
        self.optimizers["classifier"].step()
        self.optimizers["classifier"].zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        logits = self.networks["classifier"](batch["images"]).float()
        labels = batch["labels"]
        return {"loss_sum": F.cross_entropy(logits, labels, reduction="sum"),
                "correct": (logits.argmax(dim=1) == labels).sum(),
                "count": torch.tensor(labels.numel(), device=logits.device)}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        count = float(totals["count"])
        return {"loss": float(totals["loss_sum"]) / count, "accuracy": float(totals["correct"]) / count}


def checked_labels(batch: Batch, classes: int, path: str) -> Batch:
    """int64 labels (as the synthetic batches' are), each below `classes`: a label past the head is
    a device-side assertion on CUDA and silent garbage elsewhere, so it is one line here."""
    labels = batch["labels"].to(torch.int64)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= classes):
        raise UsageError(f"{path}: a label is outside 0..{classes - 1}; set classes= to the data's")
    return {"images": batch["images"], "labels": labels}


class ImageClassifierWorkload(CountedFlops, ABC):
    """One library's classifiers; a subclass says how to list, create and normalize them."""

    family: str
    sizes = tuple(PRESETS)
    default_size = "tiny"
    reference_batch = REFERENCE_BATCH

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.name = f"{self.family}:{model_name}"

    @abstractmethod
    def create_model(self, size: ClassifierSize) -> nn.Module:
        """The library's network with random weights, `size.classes` outputs, at `size.resolution`."""

    @abstractmethod
    def normalization(self, model: nn.Module) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Mean and standard deviation (per channel, of pixels in [0, 1]) the model expects."""

    @abstractmethod
    def default_resolution(self) -> int:
        """The model's own input size (the `base` preset)."""

    def presets(self) -> Mapping[str, Mapping[str, SizeValue]]:
        return {"tiny": PRESETS["tiny"], "base": {"res": self.default_resolution(), **PRESETS["base"]}}

    def classifier_size(self, size: str, given: str | None = None) -> ClassifierSize:
        """`given`: the size as the user wrote it, which errors echo (default: `size`)."""
        given = size if given is None else given
        parsed = parse_size(size, self.sizes, self.default_size, self.name)
        unknown = [key for key, _ in parsed.overrides if key not in KEYS]
        if unknown:
            raise UsageError(f"--size {shown(given)}: {shown(unknown[0])} is not a size key of {self.name} "
                             f"(keys: {', '.join(KEYS)}){closest(unknown[0], KEYS)}")
        settings = parsed.settings(self.presets())
        optimizer = require_choice(given, "opt", settings["opt"], OPTIMIZERS)
        return ClassifierSize(resolution=require_positive_int(given, "res", settings["res"], minimum=8),
                              classes=require_positive_int(given, "classes", settings["classes"], minimum=2),
                              optimizer=optimizer, learning_rate=LEARNING_RATES[optimizer])

    def normalize_size(self, size: str | None) -> str:
        """The canonical size, after checking the network builds and runs at it (on meta where it
        can: no memory, bounded time; `library.check_size`)."""
        given = size or self.default_size
        text = parse_size(given, self.sizes, self.default_size, self.name).text
        classifier_size = self.classifier_size(text, given)
        resolution = classifier_size.resolution

        def cannot_run(error: BaseException) -> str:
            return (f"{self.name} cannot run on images of {resolution} px ({type(error).__name__}: "
                    f"{first_line(error)}); choose another res")

        check_size(self.name, given, lambda: self.create_model(classifier_size),
                   lambda model: model(torch.zeros(CHECK_BATCH, 3, resolution, resolution, device=device_of(model))),
                   cannot_run)
        return text

    def build(self, size: str, seed: int = 0) -> ClassifierTrainable:
        classifier_size = self.classifier_size(size)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self.create_model(classifier_size)
        mean, std = self.normalization(model)
        return ClassifierTrainable(NormalizedClassifier(model, mean, std), classifier_size)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        """Uniform 8-bit pixels and uniform labels: the shapes, dtypes and ranges of real data."""
        classifier_size = self.classifier_size(size)
        resolution = classifier_size.resolution
        return {"images": torch.randint(0, 256, (batch_size, 3, resolution, resolution), generator=generator,
                                        dtype=torch.uint8),
                "labels": torch.randint(0, classifier_size.classes, (batch_size,), generator=generator)}


    def open_dataset(self, path: str, size: str, config: LoaderConfig):
        """Labelled images at the size's `res`, with integer labels below its classes
        (`checked_labels`): read where they lie (an image folder, a Hugging Face dataset, tar
        shards: decoded and augmented on the rank's workers, `trainspeed.data.in_place`), or
        as `trainspeed data from-arrays` writes them (`images` uint8 (3, res, res), `labels`)."""
        from trainspeed.data import open_dataset
        from trainspeed.data.sources import SHARDS, detect_format

        classifier_size = self.classifier_size(size)
        if detect_format(path) != SHARDS:
            return self._open_in_place(path, size, classifier_size, config)
        loader = open_dataset(path, config, outputs=("images", "labels"))
        columns = loader.spec.schema.columns
        resolution = classifier_size.resolution
        images_dtype, images_shape = columns["images"]
        labels_dtype, labels_shape = columns["labels"]
        if np.dtype(images_dtype) != np.uint8 or tuple(images_shape) != (3, resolution, resolution):
            raise UsageError(f"{path}: images are {np.dtype(images_dtype)} {tuple(images_shape)}; {self.name} at size "
                             f"{size!r} trains on uint8 (3, {resolution}, {resolution}) (or set res= to the data's)")
        if np.dtype(labels_dtype).kind not in "iu" or tuple(labels_shape) != ():
            raise UsageError(f"{path}: labels are {np.dtype(labels_dtype)} {tuple(labels_shape)}; write one integer class per image")
        return MappedLoader(loader, functools.partial(checked_labels, classes=classifier_size.classes, path=str(path)))

    def _open_in_place(self, path: str, size: str, classifier_size: ClassifierSize, config: LoaderConfig):
        from trainspeed.data.in_place import open_images

        opened = open_images(path, config, classifier_size.resolution)
        if opened.classes > classifier_size.classes:
            raise UsageError(f"--data {path} has {opened.classes} classes; {self.name} at size {size!r} has "
                             f"{classifier_size.classes}: set classes={opened.classes} in --size")
        return MappedLoader(opened.loader, functools.partial(checked_labels, classes=classifier_size.classes,
                                                             path=str(path)))
