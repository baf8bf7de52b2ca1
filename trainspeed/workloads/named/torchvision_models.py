"""`--workload torchvision:NAME`: torchvision's classification models, with random weights."""

from __future__ import annotations

from torch import nn

from trainspeed.errors import UsageError
from trainspeed.workloads.named.classifier import ClassifierSize, ImageClassifierWorkload
from trainspeed.workloads.named.library import import_library
from trainspeed.workloads.named.sizing import closest, shown

FAMILY = "torchvision"
EXTRA = "vision"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TAKES_IMAGE_SIZE = ("vit_",)
"""Models built for one input size, which torchvision lets a caller choose (`image_size=`)."""


class TorchvisionWorkload(ImageClassifierWorkload):
    family = FAMILY

    def __init__(self, model_name: str) -> None:
        torchvision = import_library("torchvision", EXTRA)
        self.models = torchvision.models
        classifiers = self.models.list_models(module=self.models)
        if model_name not in classifiers:
            raise UsageError(f"torchvision has no classification model {shown(model_name)} (torchvision "
                             f"{torchvision.__version__}){closest(model_name, classifiers)}")
        super().__init__(model_name)
        self.version = self.library_version = f"torchvision {torchvision.__version__}"
        self._weights = self.models.get_model_weights(model_name).DEFAULT

    def create_model(self, size: ClassifierSize) -> nn.Module:
        extra = {"image_size": size.resolution} if self.model_name.startswith(TAKES_IMAGE_SIZE) else {}
        return self.models.get_model(self.model_name, weights=None, num_classes=size.classes, **extra)

    def normalization(self, model: nn.Module) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The mean and deviation of the model's default weights' own preprocessing."""
        transforms = self._weights.transforms()
        return (tuple(getattr(transforms, "mean", IMAGENET_MEAN)), tuple(getattr(transforms, "std", IMAGENET_STD)))

    def default_resolution(self) -> int:
        crop = getattr(self._weights.transforms(), "crop_size", [224])
        return int(crop[0])


WORKLOAD = TorchvisionWorkload


def names() -> list[str]:
    models = import_library("torchvision", EXTRA).models
    return models.list_models(module=models)
