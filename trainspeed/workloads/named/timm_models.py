"""`--workload timm:NAME`: any of timm's image classifiers, with random weights (nothing is downloaded)."""

from __future__ import annotations

from torch import nn

from trainspeed.errors import UsageError
from trainspeed.workloads.named.classifier import ClassifierSize, ImageClassifierWorkload
from trainspeed.workloads.named.library import import_library
from trainspeed.workloads.named.sizing import closest, shown

FAMILY = "timm"
EXTRA = "timm"
TAGS_SHOWN = 6


class TimmWorkload(ImageClassifierWorkload):
    family = FAMILY

    def __init__(self, model_name: str) -> None:
        self.timm = import_library("timm", EXTRA)
        if not self.timm.is_model(model_name):
            raise UsageError(f"timm has no model {shown(model_name)} (timm {self.timm.__version__}, "
                             f"{len(self.timm.list_models())} models){closest(model_name, self.timm.list_models())}")
        self._check_tag(model_name)
        super().__init__(model_name)
        self.version = self.library_version = f"timm {self.timm.__version__}"
        self._pretrained_cfg = self.timm.models.get_pretrained_cfg(model_name)

    def _check_tag(self, model_name: str) -> None:
        """`NAME.TAG` names one of the architecture's pretrained configurations (its input size and
        normalization); a tag timm lacks is one line listing the ones it has."""
        architecture, dot, tag = model_name.partition(".")
        if not dot:
            return
        tags = [name.partition(".")[2] for name in self.timm.list_pretrained(f"{architecture}.*")]
        if tag in tags:
            return
        what = "an empty tag" if not tag else f"no tag {shown(tag)}"
        listed = ", ".join(tags[:TAGS_SHOWN]) + (f" and {len(tags) - TAGS_SHOWN} more" if len(tags) > TAGS_SHOWN else "")
        raise UsageError(f"timm's {shown(architecture)} has {what}: write timm:{architecture} for its default configuration"
                         + (f" or timm:{architecture}.TAG with a TAG of {listed}" if tags else "")
                         + (closest(tag, tags) if tag else ""))

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
