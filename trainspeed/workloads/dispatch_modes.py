"""Torch dispatch modes that one thread of the process is inside at a time.

A `TorchDispatchMode` keeps its stack per thread, but torch also keeps three module-wide flags
("a dispatch mode is on", ...) that each mode sets on entry and sets back to what it saw on exit.
Two threads inside modes at once (four `trainspeed.bench` calls from four threads, each counting its
workload's FLOPs on meta) interleave those saves and restores, and the process can be left with
"a dispatch mode is on" for good: from then on torch.compile compiles nothing in it (dynamo skips
every frame while a mode is on) and runs the model eagerly without a word. Every mode trainspeed
enters derives from `SerialDispatchMode`, whose entry waits until no other thread is inside one.
"""

from __future__ import annotations

import threading
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

_INSIDE = threading.RLock()
"""Held by the thread inside trainspeed's dispatch modes (re-entrant: modes nest in one thread)."""


class SerialDispatchMode(TorchDispatchMode):
    """A dispatch mode whose block runs while no other thread is inside one of these."""

    def __enter__(self) -> Any:
        _INSIDE.acquire()
        try:
            return super().__enter__()
        except BaseException:
            _INSIDE.release()
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            _INSIDE.release()
