"""The processes a test's own process starts while it watches (`watching_starts`): an audit hook on
`subprocess.Popen`, installed once for the process, that records only while a watch lasts. A
study test counts with it what the study started (warm workers, commands), which its rows do not say."""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

_watches: list[list[list[str]]] = []
"""The argument lists each open watch has seen so far, innermost last."""


def _record(event: str, args: tuple) -> None:
    if event == "subprocess.Popen" and _watches:
        for seen in _watches:
            seen.append([str(arg) for arg in args[1]])


sys.addaudithook(_record)  # an audit hook stays for the process; with no watch open it records nothing


@contextlib.contextmanager
def watching_starts() -> Iterator[list[list[str]]]:
    """The argument list of every process started from here while the block runs."""
    seen: list[list[str]] = []
    _watches.append(seen)
    try:
        yield seen
    finally:
        _watches.remove(seen)
