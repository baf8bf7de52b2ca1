"""The optional libraries named models come from, imported only when a name asks for one, and the
size check their workloads share (`check_size`)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Callable

from torch import nn

from trainspeed.errors import UsageError
from trainspeed.workloads.meta import BuildFailed, CheckStopped, Ran, run_without_memory
from trainspeed.workloads.named.sizing import shown


def import_library(module: str, extra: str) -> ModuleType:
    """`module`, or one UsageError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise UsageError(f"{module} is not installed ({error}); install it with pip install 'trainspeed[{extra}]'") from None


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else ""


def check_size(name: str, given: str, build: Callable[[], nn.Module], call: Callable[[nn.Module], None],
               cannot_run: Callable[[BaseException], str]) -> Ran[None]:
    """Build the model and run `call` on it, without its memory and within the check's time limit
    (`trainspeed.workloads.meta`): on meta, or on the host where meta cannot run it and the model
    is small enough. A model that meta builds but cannot run, and that is too large for the host,
    is let through unrun: its first step will say.

    Every failure is one UsageError echoing the size as the user gave it (`given`): a builder that
    raises cannot be built at that size; a run that raises is told by `cannot_run(error)`; a check
    past its time limit asks for a smaller size (one that nobody waits for any more just stops)."""
    try:
        return run_without_memory(build, call)
    except BuildFailed as error:
        raise UsageError(f"--size {shown(given)}: {name} cannot be built at it "
                         f"({type(error.__cause__).__name__}: {first_line(error)})") from None
    except CheckStopped as error:
        proceed = "; choose a smaller size" if error.timed_out else ""
        raise UsageError(f"--size {shown(given)}: the check of {name} at it (the model built on the meta device and "
                         f"run on a batch) stopped: {error}{proceed}") from None
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - the library's refusal, told in one line
        raise UsageError(f"--size {shown(given)}: {cannot_run(error)}") from None
