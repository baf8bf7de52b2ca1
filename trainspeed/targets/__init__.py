"""Target registry: one line per device family."""

from __future__ import annotations

from trainspeed.errors import UsageError
from trainspeed.targets.base import Target, TargetSpec
from trainspeed.targets.cpu import CpuTarget
from trainspeed.targets.cuda import CudaTarget
from trainspeed.targets.xla import XlaTarget

TARGET_FAMILIES: dict[str, type[Target]] = {
    "cpu": CpuTarget,
    "cuda": CudaTarget,
    "xla": XlaTarget,
}


def get_target(text: str) -> Target:
    """Parse `device:mode:precision` and check the target can run here."""
    spec = TargetSpec.parse(text)
    family = TARGET_FAMILIES.get(spec.device)
    if family is None:
        raise UsageError(
            f"bad target {text!r}: unknown device {spec.device!r}; choose one of {', '.join(TARGET_FAMILIES)}"
        )
    target = family(spec)
    reason = family.unavailable_reason()
    if reason:
        raise UsageError(f"target {text} cannot run here: {reason}")
    return target


def all_target_names() -> list[str]:
    return [
        f"{device}:{mode}:{precision}"
        for device, family in TARGET_FAMILIES.items()
        for mode in family.modes
        for precision in family.precisions
    ]


def available_targets() -> dict[str, str | None]:
    """Every target name -> None where usable here, else why not."""
    return {name: TARGET_FAMILIES[name.split(":")[0]].unavailable_reason() for name in all_target_names()}


__all__ = ["Target", "TargetSpec", "get_target", "available_targets", "all_target_names"]
