"""The host's torch thread counts, set once per process by the commands that run steps (a rank of
`train`, a `serve` process)."""

from __future__ import annotations

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
