"""Workload registry: one line per built-in workload, the named models of a library
(`timm:resnet50`, `torchvision:resnet18`, `hf:gpt2`: `trainspeed.workloads.named`), plus
`package.module:factory` for your own (a module of your own called timm, torchvision, hf or python
is reached as `timm.module:factory`, with its package path), and a workload of plain PyTorch pieces
by the name `trainspeed.workload_from` gave it (`python:...`, `trainspeed.workloads.pieces`).

Every command that names a workload gets it from `get_workload` and checks its `--size` with
`resolve_size`, so a bad factory or an unknown size is the same one line whichever command met it.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from trainspeed.errors import UsageError
from trainspeed.workloads.named import FAMILIES, family_of, named_workload
from trainspeed.workloads.named.sizing import clipped

if TYPE_CHECKING:  # the protocol needs torch; the registry and the command line's flags do not
    from trainspeed.workloads.base import Workload

DEFAULT_REFERENCE_BATCH = 512
"""The global batch a workload's learning rate counts as tuned at when it declares no
`reference_batch` (the study's one-GPU batch); the trainer scales the LR from there."""

BUILTIN_WORKLOADS: dict[str, str] = {
    "mahjong": "trainspeed.workloads.mahjong.workload:MahjongWorkload",
    "stylegan3": "trainspeed.workloads.stylegan3.workload:StyleGAN3Workload",
}

REQUIRED_METHODS = ("build", "synthetic_batch", "flops_per_sample")
PIECES_PREFIX = "python:"
"""A workload `trainspeed.workload_from` made (`trainspeed.workloads.pieces`)."""


def _load_factory(reference: str):
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"--workload {reference}: write it as package.module:factory")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - an import that fails in any way is the user's module
        raise UsageError(f"--workload {reference}: cannot import {module_name!r} "
                         f"({type(error).__name__}: {_first_line(error)})") from None
    try:
        factory = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"--workload {reference}: module {module_name!r} has no {attribute!r}") from None
    if not callable(factory):
        raise UsageError(f"--workload {reference}: {attribute!r} is a {type(factory).__name__}, not a factory to call")
    return factory


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def _protocol_problems(workload: object) -> list[str]:
    """What keeps `workload` from being one: missing or mistyped members (docs/workloads.md)."""
    missing = [attr for attr in ("name", "sizes", *REQUIRED_METHODS) if not hasattr(workload, attr)]
    if missing:
        return [f"lacks {', '.join(missing)}"]
    problems = []
    if not isinstance(workload.name, str) or not workload.name:
        problems.append(f"its name is {workload.name!r}, not a non-empty string")
    sizes = workload.sizes
    if not isinstance(sizes, (tuple, list)) or not sizes or not all(isinstance(s, str) for s in sizes):
        problems.append(f"its sizes are {sizes!r}, not a non-empty tuple of names")
    elif getattr(workload, "default_size", sizes[0]) not in sizes:
        problems.append(f"its default_size {getattr(workload, 'default_size')!r} is not one of its sizes")
    problems += [f"its {name} is not callable" for name in REQUIRED_METHODS if not callable(getattr(workload, name))]
    reference = getattr(workload, "reference_batch", DEFAULT_REFERENCE_BATCH)
    if reference is not None and (not isinstance(reference, int) or isinstance(reference, bool) or reference < 1):
        problems.append(f"its reference_batch is {reference!r}, not a positive integer or None")
    return problems


def is_users_module(name: str) -> bool:
    """Whether a workload name is a module of the user's own (`package.module:factory`), which
    `get_workload` imports and runs, rather than a built-in workload or a library's model by name."""
    return family_of(name) is None and name not in BUILTIN_WORKLOADS


def data_missing_for(workload: str, size: str | None, path: str | os.PathLike | None) -> str | None:
    """Why `path` holds no data `workload`'s runs can open, in one line; None where it holds some.
    The commands that start runs on another command's `--data` ask this before any run. It asks
    trainspeed's formats first, from names alone (`data_missing`). A module of the user's own may
    read a format of its own through its `open_dataset` (an .npz file, as the examples do), so where
    trainspeed's formats do not take a path that is there (and is no empty folder), that workload
    opens it, and what it says is the answer."""
    from trainspeed.data.sources import data_missing, nothing_at

    missing = data_missing(path)
    if missing is None or not is_users_module(workload) or nothing_at(str(path)) is not None:
        return missing
    from trainspeed.data.base import LoaderConfig

    try:
        loaded = get_workload(workload)
        resolved = resolve_size(loaded, size)
    except UsageError:  # it cannot be asked here: trainspeed's formats answer, and the command says the rest
        return missing
    if not hasattr(loaded, "open_dataset"):
        return missing
    try:
        loaded.open_dataset(str(path), resolved, LoaderConfig(batch_size=1, num_workers=0))
    except UsageError as error:
        return str(error)
    except Exception as error:  # noqa: BLE001 - the user's code: whatever it raises is its refusal of the path
        return f"{path}: the workload {workload} cannot open it ({type(error).__name__}: {error})"
    return None


def get_workload(name: str) -> Workload:
    """A built-in workload by name, a library's model (`timm:resnet50`), or the user's own as
    `package.module:factory`.

    The factory is called with no arguments and must return an object with the Workload
    protocol's attributes (see docs/workloads.md). A factory that cannot be imported, raises, or
    returns something else is a UsageError naming `--workload NAME`, never a traceback.
    """
    if name.startswith(PIECES_PREFIX):
        from trainspeed.workloads.pieces import workload_of_reference

        return workload_of_reference(name)
    if family_of(name) is not None:
        try:
            return named_workload(name)
        except UsageError as error:
            raise UsageError(f"--workload {clipped(name)}: {error}") from None
    if name in BUILTIN_WORKLOADS:
        reference = BUILTIN_WORKLOADS[name]
    elif ":" in name:
        reference = name
    else:
        raise UsageError(
            f"unknown workload {name!r}: choose one of {', '.join(BUILTIN_WORKLOADS)}, a library's model "
            f"({', '.join(f.example for f in FAMILIES.values())}) or give your own as package.module:factory"
        )
    factory = _load_factory(reference)
    try:
        workload = factory()
    except UsageError as error:
        raise UsageError(f"--workload {name}: {error}") from None
    except Exception as error:  # noqa: BLE001 - whatever the user's factory raises is told in one line
        raise UsageError(f"--workload {name}: the factory raised {type(error).__name__}: {_first_line(error)}") from None
    problems = _protocol_problems(workload)
    if problems:
        raise UsageError(f"--workload {name}: the factory returned a {type(workload).__name__}, which "
                         f"{'; '.join(problems)} (docs/workloads.md lists what a workload has)")
    return workload


def default_size(workload: Workload) -> str:
    """The size a command uses without `--size`: the workload's `default_size`, else its first."""
    return getattr(workload, "default_size", workload.sizes[0])


def resolve_size(workload: Workload, size: str | None) -> str:
    """The one size rule of every command: None is the workload's default size; otherwise `size`
    must be one of `sizes`, or one of them followed by `+switch` parts that are all among the
    workload's `size_switches`. Anything else is one UsageError that lists the choices.

    A workload with a `normalize_size` method (a library's model: a preset and key=value
    overrides) checks the size itself and returns its canonical form, which commands then use."""
    normalize = getattr(workload, "normalize_size", None)
    if callable(normalize):
        return normalize(size)
    if size is None:
        return default_size(workload)
    if size in workload.sizes:
        return size
    switches = tuple(getattr(workload, "size_switches", ()))
    base, *parts = size.split("+")
    if parts and base in workload.sizes and all(part in switches for part in parts):
        return size
    with_switches = f", optionally followed by +switches from {', '.join(switches)}" if switches else ""
    raise UsageError(f"--size {size!r} is not a size of workload {workload.name}: choose one of "
                     f"{', '.join(workload.sizes)}{with_switches} (default {default_size(workload)})")


def reference_batch(workload: Workload) -> int | None:
    """The global batch the workload's own learning rate was tuned at; None: never scale it."""
    return getattr(workload, "reference_batch", DEFAULT_REFERENCE_BATCH)


__all__ = ["get_workload", "is_users_module", "resolve_size", "default_size", "reference_batch", "BUILTIN_WORKLOADS",
           "DEFAULT_REFERENCE_BATCH"]
