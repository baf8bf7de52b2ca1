"""Typed configuration of a benchmark sweep, validated with messages that say how to fix it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from trainspeed.bench.timing import TimingPlan
from trainspeed.errors import UsageError

POWER_RANGE = re.compile(r"^2\^(\d+)\.\.2\^(\d+)$")


def parse_batch_sizes(text: str) -> list[int]:
    """`2^6..2^14` (every power of two in between) or a comma list such as `64,256,1024`."""
    text = text.replace(" ", "")
    match = POWER_RANGE.match(text)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if low > high:
            raise UsageError(f"bad --batch-sizes {text!r}: the range must go up, e.g. 2^6..2^14")
        return [2**k for k in range(low, high + 1)]
    sizes = []
    for part in text.split(","):
        try:
            size = 2 ** int(part[2:]) if part.startswith("2^") else int(part)
        except ValueError:
            raise UsageError(
                f"bad --batch-sizes {text!r}: write a range like 2^6..2^14 or a list like 64,256,1024"
            ) from None
        if size <= 0:
            raise UsageError(f"bad --batch-sizes {text!r}: batch size {part} must be a positive integer")
        sizes.append(size)
    return sorted(set(sizes))


@dataclass(frozen=True)
class BenchConfig:
    workload: str
    size: str
    targets: list[str]
    batch_sizes: list[int]
    out: Path
    baseline: str | None = None
    plan: TimingPlan = field(default_factory=TimingPlan)
    peak_tflops: float | None = None
    threads: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.targets:
            raise UsageError("no targets given: pass --targets, e.g. cpu:eager:fp32,xla:lazy:fp32")
        if self.baseline is not None and self.baseline not in self.targets:
            raise UsageError(f"--baseline {self.baseline} is not among --targets {','.join(self.targets)}")
        if not self.batch_sizes or min(self.batch_sizes) <= 0:
            raise UsageError("batch sizes must be positive integers, e.g. --batch-sizes 2^6..2^10")
        if self.peak_tflops is not None and self.peak_tflops <= 0:
            raise UsageError(f"--peak-tflops must be positive, got {self.peak_tflops}")
        if self.threads is not None and self.threads <= 0:
            raise UsageError(f"--threads must be positive, got {self.threads}")
        if self.plan.windows < 1 or self.plan.warmup_steps < 0:
            raise UsageError("--windows must be >= 1 and --warmup-steps >= 0")
