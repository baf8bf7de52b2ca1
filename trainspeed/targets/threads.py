"""The host's torch thread counts, set once per process by the commands that run steps (a rank of
`train`, a `serve` process), and set back where a command ran in its caller's process."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


def configure_threads(threads: int | None) -> None:
    """Intra-op and inter-op threads to `threads` (None leaves torch's defaults)."""
    if threads is None:
        return
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # fixed already by earlier parallel work in this process; intra-op threads are what count


@contextlib.contextmanager
def threads_kept() -> Iterator[None]:
    """Torch's intra-op thread count after the block (or the function it decorates) as it was
    before, whatever the block set: a command run in the caller's process
    (`trainspeed.bench(threads=1)`) leaves the caller's torch as it found it. Inter-op threads
    cannot be set back: torch takes them once per process, before its first parallel work."""
    before = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(before)
