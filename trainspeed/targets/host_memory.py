"""The peak of a process's resident memory over a window: the device memory of targets whose
device is the host (the CPU target, and XLA's PJRT CPU client), which no allocator reports."""

from __future__ import annotations

from pathlib import Path

PROC_SELF = Path("/proc/self")
SOURCE = "host RSS growth"
"""What rows measured this way say in `peak_memory_source`."""


def _status_bytes(field: str) -> int | None:
    """A `kB` line of /proc/self/status (VmRSS, VmHWM) in bytes; None off Linux."""
    try:
        for line in (PROC_SELF / "status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class HostMemoryPeak:
    """How far the resident memory rose above what the process held at `reset`: the model, its
    optimizer state, the batches and the step's activations, as the host holds them."""

    def __init__(self) -> None:
        self._rss_at_reset: int | None = None

    def reset(self) -> None:
        """The resident-set high-water mark starts again from what the process holds now (Linux:
        writing 5 to /proc/self/clear_refs)."""
        try:
            (PROC_SELF / "clear_refs").write_text("5")
        except OSError:
            self._rss_at_reset = None
            return
        self._rss_at_reset = _status_bytes("VmRSS")

    def peak_growth_bytes(self) -> int | None:
        peak = _status_bytes("VmHWM")
        if peak is None or self._rss_at_reset is None:
            return None
        return max(0, peak - self._rss_at_reset)
