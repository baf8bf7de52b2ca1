"""The optional libraries named models come from, imported only when a name asks for one."""

from __future__ import annotations

import importlib
from types import ModuleType

from trainspeed.errors import UsageError


def import_library(module: str, extra: str) -> ModuleType:
    """`module`, or one UsageError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise UsageError(f"{module} is not installed ({error}); install it with pip install 'trainspeed[{extra}]'") from None


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else ""
