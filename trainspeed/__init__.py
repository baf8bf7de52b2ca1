"""trainspeed: measure PyTorch training speed per device, backend and batch size, then train.

From Python (docs/python.md): `trainspeed.workload_from(model=..., loss=..., batch=...,
optimizer=...)` makes a workload of plain PyTorch pieces, and `trainspeed.bench`, `check`, `train`,
`plan`, `report` and `study` are the commands, their flags as keywords, returning their rows
(`trainspeed.api`).

`import trainspeed` imports none of them: each name loads its module on first use, so the package
starts as fast as `trainspeed --help` and without torch. Four of the commands share their name with
the package that does their work (`trainspeed.bench`, `train`, `plan`, `report`); those packages
are made callable here (`CommandPackage`), so `trainspeed.bench(...)` runs the command and
`trainspeed.bench.results` is still the module it always was.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "bench": "trainspeed.api",
    "check": "trainspeed.api",
    "train": "trainspeed.api",
    "plan": "trainspeed.api",
    "report": "trainspeed.api",
    "study": "trainspeed.api",
    "workload_from": "trainspeed.workloads.pieces",
    "Rows": "trainspeed.api",
    "TrainingFailed": "trainspeed.api",
    "UsageError": "trainspeed.errors",
}
"""Each public name and the module that defines it, imported when the name is first used."""

__all__ = list(_PUBLIC)


class CommandPackage(ModuleType):
    """A package of trainspeed that is also its command's function: calling it runs
    `trainspeed.api.NAME`, whose keywords (and `inspect.signature`) it shows."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._command(*args, **kwargs)

    @property
    def _command(self) -> Any:
        return getattr(importlib.import_module("trainspeed.api"), self.__name__.rpartition(".")[2])

    @property
    def __signature__(self) -> Any:
        import inspect

        return inspect.signature(self._command)


for _name in ("bench", "train", "plan", "report"):
    importlib.import_module(f"{__name__}.{_name}").__class__ = CommandPackage  # each package's __init__ is a docstring


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'trainspeed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
