"""The remote study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.bench.config import BATCH_SIZE_LIST, SYNTHETIC_FEED_LIST
from trainspeed.flags import POSITIVE, THREADS, Range, comma_list, flag_field

EMULATIONS = ("auto", "client")
LINK_LIST = comma_list(what="links, loopback or RATE/RTT in tc's spelling", example="loopback,1gbit/0.2ms")
"""`--links`: each link checked where the study reads it (`links.Link.parse`)."""


@dataclass(frozen=True)
class RemoteConfig:
    out: str
    links: tuple[str, ...] = flag_field(("loopback", "1gbit/0.2ms", "100mbit/1ms"), read=LINK_LIST,
                                        help="loopback and RATE/RTT links (tc spelling)")
    """loopback or RATE/RTT in tc's spelling."""
    emulation: str = flag_field("auto", help="auto (namespaces and tc where possible, else in the client) or client")
    """auto: namespaces and tc where possible, else in the client; client: always in the client."""
    feeds: tuple[str, ...] = flag_field(("host", "device"), name="--feed", read=SYNTHETIC_FEED_LIST,
                                        help="host, device or host,device")
    target: str = flag_field("cpu:eager:fp32", help="the local baseline and what every server serves")
    """The local baseline, and what every server serves."""
    size: str = flag_field("tiny", help="Mahjong size")
    batch_sizes: tuple[int, ...] = flag_field(tuple(2**k for k in range(6, 14)), read=BATCH_SIZE_LIST,
                                              help="a range 2^6..2^13 or a list 64,512,2048")
    threads: int = flag_field(1, help="torch threads of the client and each server", value_range=THREADS)
    windows: int = flag_field(3, help="timed windows per configuration", value_range=POSITIVE)
    min_window_s: float = flag_field(0.5, help="seconds each window lasts at least",
                                     value_range=Range(0, 3600, low_open=True, why_high=" s"))
    min_steps_per_window: int = flag_field(4, help="steps each window holds at least (pipelining overlaps steps "
                                           "only inside a window)", value_range=POSITIVE)
    """Pipelining overlaps steps only inside a window, which ends synced."""
    warmup_steps: int = 1
    rounds: int = flag_field(1, help="sweeps over every batch size and link", value_range=POSITIVE)
    lock: str | None = flag_field(None, help="a file every bench run holds with flock (a shared machine)")
    """A file every bench run holds (`flock`) on a machine shared with other benchmarks."""


PRESETS: dict[str, dict[str, object]] = {
    "smoke": dict(links=("loopback", "100mbit/1ms"), feeds=("host",), batch_sizes=(64,), windows=1, min_window_s=0.05,
                  min_steps_per_window=2),
    "quick": dict(batch_sizes=(64, 512, 2048), min_window_s=0.3),
    "full": {},
}
