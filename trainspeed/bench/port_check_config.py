"""What `trainspeed check` is asked: the port check's settings, whose fields are the command's flags.

The XLA check (`port_check.py`) and the jax family's lowering check (`jax_port_check.py`) both
take it; neither imports torch for it, so `trainspeed check --help` reads it at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import INT_FLAG_MAX, MAX_BATCH_SIZE, ranged

XLA_DEVICE = "xla"
JAX_DEVICE = "jax"


@dataclass(frozen=True)
class PortCheckConfig:
    workload: str = "mahjong"
    size: str | None = None
    """None: the workload's default size."""
    target: str = "xla:lazy:fp32"
    batch_size: int = ranged(8, 1, MAX_BATCH_SIZE)
    warmup_steps: int = ranged(3, 0, INT_FLAG_MAX)
    """Untimed steps before the measured ones: the first step compiles, and an optimizer whose
    state appears after its first step compiles a second graph."""
    steps: int = ranged(5, 1, INT_FLAG_MAX)
    """Measured steps: steady state, where nothing should fall back, compile or sync."""
    seed: int = 0
    out: Path | None = None
    """A JSON file the result is written to (whole, never over an existing file); None: printed only."""
    strict: bool = False
    """Findings make the command fail (exit code 1), for CI."""
    platform: str | None = None
    """A `jax:*` target's check: lower the step for this platform (tpu, cpu, cuda) here, without
    its device (None: JAX's default device's platform)."""
    command: str | None = None

    def __post_init__(self) -> None:
        check_xla_target(self.target)
        if self.platform is not None and self.target.strip().split(":")[0] != JAX_DEVICE:
            raise UsageError(f"check: --platform lowers a jax:* target's step for a platform; {self.target} runs its "
                             "steps here (drop --platform, or give --target jax:jit:fp32)")


def check_xla_target(name: str) -> None:
    """Only an `xla:*` target has the counters the check reads, and a `jax:*` target lowers its step;
    any other is refused before anything is imported."""
    if name.strip().split(":")[0] not in (XLA_DEVICE, JAX_DEVICE):
        raise UsageError(f"check: --target {name} is not an XLA target; the port check runs on xla:* targets "
                         "(steps counted on the device) and jax:* targets (the step lowered for --platform), "
                         "e.g. --target xla:lazy:fp32")
