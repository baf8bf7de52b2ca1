"""The optional libraries named models come from, imported only when a name asks for one."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Callable

import torch

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


CHECK_DEVICES = ("meta", "cpu")
"""Where a size's forward pass is tried: meta costs nothing; the host runs what meta cannot (a
kernel with no meta implementation, such as some libraries' grouped expert matmuls)."""


def check_forward(forward: Callable[[torch.device], None]) -> None:
    """Run `forward` (build and call the model on a device) on meta, else on the host; raise the
    host's error when neither runs it."""
    for device in CHECK_DEVICES:
        try:
            with torch.device(device):
                forward(torch.device(device))
            return
        except Exception:  # noqa: BLE001 - meta's refusal is not the model's; the host decides
            if device == CHECK_DEVICES[-1]:
                raise
