"""The throughput study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from trainspeed.bench.config import BATCH_SIZE_LIST, SYNTHETIC_FEED_LIST, TARGET_LIST, BenchConfig, TimingPlan
from trainspeed.flags import POSITIVE, THREADS, WORKLOAD_HELP, Range, flag_field

ROWS_FILE = "throughput.jsonl"
WINDOW_S = Range(0, 3600, low_open=True, why_high=" s")


@dataclass(frozen=True)
class ThroughputConfig:
    out: str
    workload: str = flag_field("mahjong", help=WORKLOAD_HELP)
    size: str = flag_field("tiny", help="the workload's size")
    targets: tuple[str, ...] = flag_field((), help="targets compared, device:mode:precision", read=TARGET_LIST,
                                          default_text="the study's targets available here")
    """(): the study's targets that this machine has (`study.default_targets`)."""
    batch_sizes: tuple[int, ...] = flag_field(tuple(2**k for k in range(6, 13)), read=BATCH_SIZE_LIST,
                                              help="a range 2^6..2^12 or a list 64,256,1024")
    feeds: tuple[str, ...] = flag_field(("device", "host"), name="--feed", read=SYNTHETIC_FEED_LIST,
                                        help="device, host or device,host")
    windows: int = flag_field(5, help="timed windows per configuration", value_range=POSITIVE)
    min_window_s: float = flag_field(0.5, help="seconds each window lasts at least", value_range=WINDOW_S)
    warmup_steps: int = 3
    threads: int | None = flag_field(1, help="torch CPU threads", value_range=THREADS)

    def bench_config(self, command: str) -> BenchConfig:
        """The one bench run of the study (checked as `trainspeed bench` checks its flags)."""
        return BenchConfig(workload=self.workload, size=self.size, targets=list(self.targets),
                           batch_sizes=list(self.batch_sizes), out=Path(self.out) / ROWS_FILE,
                           plan=TimingPlan(warmup_steps=self.warmup_steps, windows=self.windows,
                                           min_window_s=self.min_window_s),
                           feeds=list(self.feeds), threads=self.threads, run_id=f"throughput-{uuid.uuid4().hex[:8]}",
                           command=command)


PRESETS: dict[str, dict[str, object]] = {
    "smoke": dict(targets=("cpu:eager:fp32", "cpu:eager:bf16"), batch_sizes=(16, 32), windows=1, min_window_s=0.05,
                  warmup_steps=1),
    "quick": dict(batch_sizes=(64, 256, 1024), windows=3, min_window_s=0.3),
    "full": {},
}
