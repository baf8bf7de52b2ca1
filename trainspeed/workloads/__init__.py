"""Workload registry: one line per built-in workload, plus `package.module:factory` for your own."""

from __future__ import annotations

import importlib

from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable, Workload

BUILTIN_WORKLOADS: dict[str, str] = {
    "mahjong": "trainspeed.workloads.mahjong.workload:MahjongWorkload",
    "stylegan3": "trainspeed.workloads.stylegan3.workload:StyleGAN3Workload",
}


def _load_factory(reference: str):
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"cannot import workload module {module_name!r}: {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"workload module {module_name!r} has no {attribute!r}") from None


def get_workload(name: str) -> Workload:
    """A built-in workload by name, or the user's own as `package.module:factory`.

    The factory is called with no arguments and must return an object with the Workload
    protocol's attributes (see docs/workloads.md).
    """
    if name in BUILTIN_WORKLOADS:
        reference = BUILTIN_WORKLOADS[name]
    elif ":" in name:
        reference = name
    else:
        raise UsageError(
            f"unknown workload {name!r}: choose one of {', '.join(BUILTIN_WORKLOADS)} "
            "or give your own as package.module:factory"
        )
    workload = _load_factory(reference)()
    missing = [attr for attr in ("name", "sizes", "build", "synthetic_batch", "flops_per_sample") if not hasattr(workload, attr)]
    if missing:
        raise UsageError(f"workload {name!r} lacks {', '.join(missing)} (see docs/workloads.md)")
    return workload


__all__ = ["Batch", "Trainable", "Workload", "get_workload", "BUILTIN_WORKLOADS"]
