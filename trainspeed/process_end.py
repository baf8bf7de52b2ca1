"""How a trainspeed program ends: once its work is flushed, at once.

After its last line, a process that imported torch spends about a second of wall time (0.5-0.7
CPU-seconds on a 2-core machine) finalizing the interpreter: tearing down its modules and running
libtorch's C++ static destructors. None of that writes anything of the program's, yet a command
timed from the outside (a plan's check, `auto_vs_fixed.py`, a user's `time`) pays it, and so does
each of the many commands a study or the test suite starts.

`end_process` does what a normal exit does that matters and skips the rest: it waits for nothing
more than Python's exit would (a thread still working makes it a normal exit), runs the `atexit`
functions (temporary folders removed, `multiprocessing` children stopped, logging flushed), flushes
stdout and stderr, and ends the process with `os._exit`. Only program entry points call it, never
a function that Python code may call (`trainspeed.cli.main` returns its code to its caller).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def _threads_working() -> bool:
    """Whether a thread Python's exit would wait for is still running."""
    main = threading.main_thread()
    return any(thread.is_alive() and not thread.daemon for thread in threading.enumerate() if thread is not main)


def end_process(code: int | None) -> NoReturn:
    """Exit with `code` (None is 0) as `sys.exit` would, without the interpreter's finalization."""
    if _threads_working() or not isinstance(code, (int, type(None))):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: what Python's own exit would not print either
            pass
    os._exit((code or 0) & 0xFF)
