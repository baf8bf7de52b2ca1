"""trainspeed: measure PyTorch training speed per device, backend and batch size, then train.

From Python: `trainspeed.workload_from(model=..., loss=..., batch=..., optimizer=...)` makes a
workload of plain PyTorch pieces, which every command takes.

`import trainspeed` imports none of it: each name loads its module on first use, so the package
starts as fast as `trainspeed --help` and without torch.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "workload_from": "trainspeed.workloads.pieces",
    "UsageError": "trainspeed.errors",
}
"""Each public name and the module that defines it, imported when the name is first used."""

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'trainspeed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[__name__], name, value)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
