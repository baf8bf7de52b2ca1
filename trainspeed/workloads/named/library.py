"""The optional libraries named models come from, imported only when a name asks for one."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Callable

import torch
from torch import nn

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


HOST_CHECK_MAX_PARAMETERS = 100_000_000
"""The largest model a size check builds on the host (400 MB of float32) when meta cannot run it."""


def check_forward(build: Callable[[], nn.Module], call: Callable[[nn.Module], None]) -> None:
    """Build the model and run `call` on it on the meta device (no memory, no time); where meta
    has no kernel for an op (some libraries' grouped expert matmuls), again on the host, if the
    model is small enough to build there; raise the host's error when it cannot run. A larger
    model that meta builds but cannot run is let through: its first step will say."""
    with torch.device("meta"):
        model = build()
        try:
            call(model)
            return
        except Exception:  # noqa: BLE001 - meta's refusal is not the model's; the host decides
            parameters = sum(p.numel() for p in model.parameters())
    if parameters > HOST_CHECK_MAX_PARAMETERS:
        return
    call(build())
