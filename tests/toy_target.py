"""The one device family the tests define: the host CPU, written against the Target protocol from
scratch (not a subclass of the built-in CPU family), registered through the environment alone,
`TRAINSPEED_TARGET_FAMILIES="host=toy_target:HostTarget"` with tests/ on PYTHONPATH (docs/targets.md
shows it), and named in `device_name`, so rows prove it ran.

`FarTarget` is the same family pretending its device lives elsewhere, with the protocol's hooks for
such a device: names of its own spelling, a reachability check, a peak and row fields of its own,
one rank only, and a device that can be lost.
"""

from __future__ import annotations

import dataclasses

import torch

from trainspeed.errors import DeviceLost, UsageError
from trainspeed.targets.base import Target, TargetSpec

DEVICE_NAME = "host family defined in a test"


class HostTarget(Target):
    device_type = "cpu"  # torch's device type: autocast and tensors live there
    modes = ("eager",)
    precisions = ("fp32",)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return DEVICE_NAME

    def sync(self) -> None:
        """The CPU runs each kernel to its end before returning."""

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, MemoryError)


@dataclasses.dataclass(frozen=True)
class FarSpec(TargetSpec):
    place: str = ""

    def __str__(self) -> str:
        return f"far:{self.place}:{self.mode}:{self.precision}"


class FarTarget(HostTarget):
    """Spelled `far:PLACE:eager:fp32` (four parts, which the default parser refuses); steps run on
    the host, but the family pretends they ran elsewhere: it reports a peak and a row field of its
    own, and trains on one rank only. PLACE `nowhere` answers no reachability check; a step after
    `steps_before_loss` more steps finds the device lost."""

    data_parallel = "single"
    steps_before_loss: int | None = None

    @classmethod
    def parse_spec(cls, text: str) -> TargetSpec:
        parts = text.split(":")
        if len(parts) != 4 or not all(parts):
            raise UsageError(f"bad target {text!r}: write far:PLACE:eager:fp32")
        return FarSpec("far", parts[2], parts[3], place=parts[1])

    @classmethod
    def check_reachable(cls, spec: TargetSpec) -> None:
        if spec.place == "nowhere":
            raise UsageError(f"target {spec}: nothing answers at {spec.place}")

    def device_name(self) -> str:
        return f"far away at {self.spec.place}"

    def run_step(self, trainable, batch):
        if self.steps_before_loss is not None:
            if self.steps_before_loss == 0:
                raise DeviceLost(f"target {self}: the far device went away")
            self.steps_before_loss -= 1
        return super().run_step(trainable, batch)

    def measured_peak_tflops(self) -> float:
        return 123.0

    def row_fields(self) -> dict:
        return {"transport": "pigeon", "link": self.spec.place}
