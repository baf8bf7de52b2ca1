"""Standard models by name: `timm:NAME`, `torchvision:NAME`, `hf:MODEL_TYPE`.

Each family is one module that builds its library's models as workloads (`classifier.py` for the
two vision libraries, `hf_models.py` for transformers); the library is imported only when a name
of its family is asked for, and a missing one is one line naming the extra that installs it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    prefix: str
    module: str
    """Holds `WORKLOAD` (the workload class, called with the name after the prefix) and `names()`."""
    library: str
    extra: str
    example: str
    argument: str = "NAME"
    """What follows the prefix: a model's name, or (transformers) a config's model type."""

    @property
    def pattern(self) -> str:
        return f"{self.prefix}:{self.argument}"


FAMILIES: dict[str, Family] = {
    "timm": Family("timm", "trainspeed.workloads.named.timm_models", "timm", "timm", "timm:resnet50"),
    "torchvision": Family("torchvision", "trainspeed.workloads.named.torchvision_models", "torchvision", "vision",
                          "torchvision:resnet18"),
    "hf": Family("hf", "trainspeed.workloads.named.hf_models", "transformers", "hf", "hf:gpt2", "MODEL_TYPE"),
}


def family_of(name: str) -> Family | None:
    """The family a `--workload` name belongs to (`timm:resnet50` -> timm), or None."""
    prefix, colon, rest = name.partition(":")
    return FAMILIES.get(prefix) if colon and rest and "." not in prefix else None


def named_workload(name: str):
    family = family_of(name)
    assert family is not None, name
    module = importlib.import_module(family.module)
    return module.WORKLOAD(name.partition(":")[2])


def family_names(family: Family) -> list[str]:
    """Every name the family's library can build here (UsageError when it is not installed)."""
    return importlib.import_module(family.module).names()
