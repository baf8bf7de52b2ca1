"""Signal handlers a command installs for as long as it runs, where Python lets it.

Python installs a signal handler only from the main thread of the main interpreter (elsewhere
`signal.signal` raises ValueError), and only that thread ever runs one. A command run from another
thread of the caller's program (`trainspeed.train(...)` in a worker thread) therefore installs
none: the signals keep the handlers the program chose, which are its main thread's to choose (a
Ctrl-C stays the program's KeyboardInterrupt; a run it starts still dies with its process).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

Handler = Callable[[int, "FrameType | None"], Any]


@contextlib.contextmanager
def handling(signals: Iterable[signal.Signals], handler: Handler) -> Iterator[bool]:
    """`handler` for `signals` inside the block, the previous handlers back after it; yields whether
    it was installed (False in any thread but the main one, where nothing is changed)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, handler)
        yield True
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
