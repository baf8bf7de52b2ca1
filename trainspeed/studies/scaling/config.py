"""The scaling study's settings and presets (read by the command line without torch)."""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.errors import UsageError
from trainspeed.flags import (
    DEFAULT_INT_RANGE,
    POSITIVE,
    POSITIVE_INTS,
    THREADS,
    WINDOW_S,
    WORKERS,
    flag_field,
)


@dataclass(frozen=True)
class ScalingConfig:
    out: str
    data: str = flag_field(help="self-play shards; made when missing", default_text="OUT/scaling_data")
    """Self-play shards of the workload; made (`trainspeed data mahjong-selfplay`) when missing."""
    size: str = flag_field("tiny", help="Mahjong size")
    target: str = flag_field("cpu:eager:fp32", help="target of every rank")
    ranks: tuple[int, ...] = flag_field((1, 2), read=POSITIVE_INTS, help="rank counts, 1 among them")
    batch_sizes: tuple[int, ...] = flag_field((256, 1024, 4096), read=POSITIVE_INTS, help="per-device batch sizes")
    """Per-device batch sizes."""
    steps: int = flag_field(30, help="steps per run", value_range=POSITIVE)
    repeats: int = flag_field(2, help="repeats of every configuration", value_range=POSITIVE)
    threads: int = flag_field(1, help="torch threads per rank", value_range=THREADS)
    num_workers: int = flag_field(1, help="loader workers per rank", value_range=WORKERS)
    timing_warmup_steps: int = flag_field(5, help="steps left out of the steady-state samples/s",
                                          value_range=DEFAULT_INT_RANGE)
    bench_min_window_s: float = flag_field(0.5, help="seconds each timed window of the bench lasts at least",
                                           value_range=WINDOW_S)
    """The bench's `--min-window-s`: its samples/s is what every run's vs-bench efficiency divides by."""
    make_data_games: int = 150

    def check(self) -> None:
        if 1 not in self.ranks:
            raise UsageError(f"scaling study: --ranks {','.join(map(str, self.ranks))} must include 1, "
                             "the run every other is compared with")
        if self.steps <= self.timing_warmup_steps:
            raise UsageError(f"scaling study: --steps {self.steps} must exceed the {self.timing_warmup_steps} "
                             "timing warm-up steps")
        for flag, value, least in (("--repeats", self.repeats, 1), ("--threads", self.threads, 1),
                                   ("--num-workers", self.num_workers, 0), ("--timing-warmup-steps", self.timing_warmup_steps, 0)):
            if value < least:
                raise UsageError(f"scaling study: {flag} must be at least {least}, got {value}")
        if not WINDOW_S.holds(self.bench_min_window_s):
            raise UsageError(f"scaling study: --bench-min-window-s must be a positive number of seconds up to "
                             f"{WINDOW_S.top:g}, got {self.bench_min_window_s}")



PRESETS = {
    "smoke": dict(ranks=(1, 2), batch_sizes=(32,), steps=4, repeats=1, timing_warmup_steps=1, bench_min_window_s=0.05,
                  make_data_games=22),
    "quick": dict(batch_sizes=(256, 1024), steps=20, repeats=1, make_data_games=60),
    "full": {},
}
