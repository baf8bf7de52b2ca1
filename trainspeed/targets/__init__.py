"""Target registry: one line per device family, plus families of your own.

A family of your own is a `Target` subclass in any importable module, registered for a process and
every process it starts (torchrun ranks, loader workers) through the environment:

    TRAINSPEED_TARGET_FAMILIES="npu=my_package.npu_target:NpuTarget" trainspeed bench --targets npu:eager:fp32
"""

from __future__ import annotations

import importlib
import os

from trainspeed.errors import UsageError
from trainspeed.targets.base import Target, TargetSpec
from trainspeed.targets.cpu import CpuTarget
from trainspeed.targets.cuda import CudaTarget
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.targets.remote import RemoteTarget
from trainspeed.targets.xla import XlaTarget
from trainspeed.workloads.base import Workload

BUILTIN_FAMILIES: dict[str, type[Target]] = {
    "cpu": CpuTarget,
    "cuda": CudaTarget,
    "xla": XlaTarget,
    "jax": JaxTarget,
    "remote": RemoteTarget,
}
FAMILIES_VARIABLE = "TRAINSPEED_TARGET_FAMILIES"


def _load_class(device: str, reference: str) -> type[Target]:
    module_name, _, class_name = reference.partition(":")
    try:
        family = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise UsageError(f"{FAMILIES_VARIABLE}: cannot load {device}={reference} ({error})") from None
    if not (isinstance(family, type) and issubclass(family, Target)):
        raise UsageError(f"{FAMILIES_VARIABLE}: {reference} is not a trainspeed Target subclass")
    return family


def target_families() -> dict[str, type[Target]]:
    """Built-in families, then those named in TRAINSPEED_TARGET_FAMILIES (`name=module:Class,...`)."""
    families = dict(BUILTIN_FAMILIES)
    for entry in filter(None, (e.strip() for e in os.environ.get(FAMILIES_VARIABLE, "").split(","))):
        device, separator, reference = entry.partition("=")
        if not separator or ":" not in reference:
            raise UsageError(f"{FAMILIES_VARIABLE}: bad entry {entry!r}; write name=package.module:Class")
        families[device.strip()] = _load_class(device.strip(), reference.strip())
    return families


def _family_and_spec(text: str) -> tuple[type[Target], TargetSpec]:
    """The family named by the first `:`-part of a target name, and the spec it parses the name into."""
    device = text.strip().split(":", 1)[0]
    families = target_families()
    family = families.get(device)
    if family is None:
        raise UsageError(
            f"bad target {text!r}: unknown device {device!r}; choose one of {', '.join(families)}"
        )
    return family, family.parse_spec(text)


def target_family(text: str) -> type[Target]:
    """The family of a target name, checked (mode, precision, availability, and for a device that
    lives elsewhere, that it answers) without touching a device."""
    family, spec = _family_and_spec(text)
    family.check_spec(spec)
    reason = family.unavailable_reason()
    if reason:
        raise UsageError(f"target {text} cannot run here: {reason}")
    family.check_reachable(spec)
    return family


def check_target_name(text: str) -> None:
    """UsageError where the name is no target of a known family (its mode, precision and options
    checked), without asking whether the device is here or answers: for names that describe rows."""
    family, spec = _family_and_spec(text)
    family.check_spec(spec)


def check_target_builds(text: str, workload: Workload, devices: int = 1) -> None:
    """UsageError, before anything runs, when the target cannot build the workload (a remote
    server that does not build it, or builds another definition under its name), or cannot run
    over `devices` devices."""
    family, spec = _family_and_spec(text)
    family.check_devices(spec, devices)
    family.check_workload(spec, workload)


def get_target(text: str) -> Target:
    """Parse a target name (`device:mode:precision`, or a family's own spelling) and build the
    target (this touches the device)."""
    family, spec = _family_and_spec(text)
    family.check_spec(spec)
    reason = family.unavailable_reason()
    if reason:
        raise UsageError(f"target {text} cannot run here: {reason}")
    return family(spec)


def all_target_names() -> list[str]:
    return [
        f"{device}:{mode}:{precision}"
        for device, family in target_families().items()
        for mode in family.modes
        for precision in family.precisions
    ]


def available_targets() -> dict[str, str | None]:
    """Every target name -> None where usable here, else why not."""
    families = target_families()
    return {name: families[name.split(":")[0]].unavailable_reason() for name in all_target_names()}


__all__ = ["Target", "TargetSpec", "get_target", "target_family", "check_target_builds", "available_targets",
           "all_target_names"]
