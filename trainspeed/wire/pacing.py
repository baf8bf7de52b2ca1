"""A link emulated inside the client, where network namespaces and `tc` are not available.

The honest emulation is a real link: `trainspeed study remote` runs server and client in two
network namespaces joined by a veth pair that `tc netem` shapes (rate and delay), and the kernel
does the rest. Where that is not possible (no root, no `ip netns`), the client can hold its own
messages back instead: each outgoing message leaves no sooner than the link would have carried the
ones before it at `rate`, and each reply is handed over `rtt` after it arrived. Rows measured so
say `link: client-side limit ...`, because this leaves out what a real link adds (TCP's window, the
kernel's queues) and paces only this client's messages, not gRPC's own.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from trainspeed.errors import UsageError

RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_rate(text: str) -> float:
    """`100mbit`, `1gbit`, `2.5gbit` (tc's spelling) -> bits per second."""
    match = RATE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"bad rate {text!r}: write e.g. 100mbit or 1gbit")
    return float(match.group(1)) * RATE_UNITS[match.group(2)]


def parse_duration(text: str) -> float:
    """`200us`, `0.2ms`, `1s` -> seconds."""
    match = DURATION.match(text)
    if not match:
        raise UsageError(f"bad duration {text!r}: write e.g. 200us or 0.2ms")
    return float(match.group(1)) * DURATION_UNITS[match.group(2)]


@dataclass
class Pacer:
    rate_bits_s: float | None
    rtt_s: float = 0.0
    _link_free_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def before_send(self, nbytes: int) -> None:
        """Block until the emulated link has carried this message (called by the sending thread)."""
        if not self.rate_bits_s:
            return
        with self._lock:
            now = time.monotonic()
            self._link_free_at = max(now, self._link_free_at) + nbytes * 8 / self.rate_bits_s
            wait = self._link_free_at - now
        time.sleep(wait)

    def hold_reply(self, arrived_at: float) -> None:
        """Block until `rtt` after a reply arrived (called by the thread that takes the reply)."""
        wait = arrived_at + self.rtt_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
