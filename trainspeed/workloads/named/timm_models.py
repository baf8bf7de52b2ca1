"""`--workload timm:NAME`: any of timm's image classifiers, with random weights (nothing is downloaded)."""

from __future__ import annotations

from torch import nn

from trainspeed.errors import UsageError
from trainspeed.workloads.named.classifier import ClassifierSize, ImageClassifierWorkload
from trainspeed.workloads.named.library import import_library
from trainspeed.workloads.named.sizing import closest

FAMILY = "timm"
EXTRA = "timm"


class TimmWorkload(ImageClassifierWorkload):
    family = FAMILY

    def __init__(self, model_name: str) -> None:
        self.timm = import_library("timm", EXTRA)
        if not self.timm.is_model(model_name):
            raise UsageError(f"timm has no model {model_name!r} (timm {self.timm.__version__}, "
                             f"{len(self.timm.list_models())} models){closest(model_name, self.timm.list_models())}")
        super().__init__(model_name)
        self.version = self.library_version = f"timm {self.timm.__version__}"
        self._pretrained_cfg = self.timm.models.get_pretrained_cfg(model_name)

    def create_model(self, size: ClassifierSize) -> nn.Module:
        """A model whose input size is fixed (a ViT's position embeddings) is built at the size's."""
        fixed = bool(self._pretrained_cfg and self._pretrained_cfg.fixed_input_size)
        extra = {"img_size": size.resolution} if fixed else {}
        return self.timm.create_model(self.model_name, pretrained=False, num_classes=size.classes, **extra)

    def normalization(self, model: nn.Module) -> tuple[tuple[float, ...], tuple[float, ...]]:
        config = getattr(model, "pretrained_cfg", None) or {}
        return (tuple(config.get("mean", self.timm.data.IMAGENET_DEFAULT_MEAN)),
                tuple(config.get("std", self.timm.data.IMAGENET_DEFAULT_STD)))

    def default_resolution(self) -> int:
        return int(self._pretrained_cfg.input_size[-1]) if self._pretrained_cfg else 224


WORKLOAD = TimmWorkload


def names() -> list[str]:
    return import_library("timm", EXTRA).list_models()
