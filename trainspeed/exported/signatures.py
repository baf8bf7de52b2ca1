"""Each exported program checked against its manifest before it runs or anything is written.

A program's signature (the shapes and dtypes of its inputs and outputs, the platforms it was
lowered for, its devices) is in the artifact itself (`jax.export.Exported`); the manifest says what
the loader and the loop will hand it: the state's leaves, the batch's columns at the program's batch
size, one learning rate per optimizer group (and the slices' order, for the step in slices). A
manifest edited to another batch size, another platform or one optimizer group fewer would
otherwise fail inside XLA with a traceback, after the run folder was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainspeed.errors import UsageError
from trainspeed.exported.manifest import Manifest

TRAIN, SLICED, EVAL = "train", "sliced", "eval"


@dataclass(frozen=True)
class Slot:
    """One input or output as the manifest says it: what it is, its shape and dtype (None: any;
    a validation sum's shape and a loss's dtype are the workload's)."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str | None

    def fits(self, aval: Any) -> bool:
        return (self.shape is None or tuple(aval.shape) == self.shape) and \
            (self.dtype is None or np.dtype(aval.dtype) == _dtype(self.dtype))

    def __str__(self) -> str:
        return f"{self.dtype or 'any dtype'}{list(self.shape) if self.shape is not None else ''}"


def _dtype(name: str) -> np.dtype:
    """`name` as JAX holds it on this machine (int64 as int32 where x64 is off, as at export)."""
    import jax

    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(jax.dtypes.canonicalize_dtype(np.dtype(name)))


def expected_inputs(manifest: Manifest, kind: str, batch_size: int) -> list[Slot]:
    """The inputs the loader and the loop hand a program of `kind` at `batch_size`."""
    slots = [Slot(f"state leaf {leaf.name}", tuple(leaf.shape), leaf.dtype) for leaf in manifest.state]
    slots += [Slot(f"column {column.name}", (batch_size, *column.sample_shape), column.dtype)
              for column in manifest.columns]
    if kind in (TRAIN, SLICED):
        slots.append(Slot("learning rates (one per optimizer group)", (len(manifest.optimizer_groups),), "float32"))
    if kind == SLICED:
        slots.append(Slot("the slices' order", (batch_size,), "int32"))
    return slots


def expected_outputs(manifest: Manifest, kind: str, networks: int = 0) -> list[Slot]:
    """The outputs the loop reads of a program of `kind` (`networks`: of the step in slices)."""
    if kind == EVAL:
        return [Slot(f"validation sum {name}", None, None) for name in manifest.eval_metrics]
    slots = [Slot(f"state leaf {leaf.name}", tuple(leaf.shape), leaf.dtype) for leaf in manifest.state]
    slots.append(Slot("loss", (), None))
    slots += [Slot("a network's squared gradient norm", (), None) for _ in range(2 * networks)]
    return slots


def _mismatch(found: Any, slots: list[Slot], what: str) -> str | None:
    if len(found) != len(slots):
        return f"has {len(found)} {what}s, and the manifest says {len(slots)}"
    verb = "takes" if what == "input" else "returns"
    for index, (aval, slot) in enumerate(zip(found, slots)):
        if not slot.fits(aval):
            return (f"{verb} {aval.dtype}{list(aval.shape)} as {what} {index} ({slot.name[:60]}), and the manifest "
                    f"says {slot}")
    return None


def check_signature(exported: Any, manifest: Manifest, kind: str, batch_size: int, what: str,
                    networks: int = 0) -> None:
    """UsageError in one line where the program `exported` (a `jax.export.Exported`) does not take
    and return what the manifest says (`what`: the file, as told)."""
    if tuple(exported.platforms) != tuple(manifest.platforms):
        raise UsageError(f"{what}: lowered for {','.join(exported.platforms)}, and the manifest says "
                         f"{','.join(manifest.platforms)}; export the step again")
    if exported.nr_devices != manifest.program_devices:
        raise UsageError(f"{what}: a program of {exported.nr_devices} devices, and the manifest says "
                         f"{manifest.program_devices}; export the step again")
    problem = _mismatch(exported.in_avals, expected_inputs(manifest, kind, batch_size), "input") or \
        _mismatch(exported.out_avals, expected_outputs(manifest, kind, networks), "output")
    if problem is not None:
        raise UsageError(f"{what}: the program {problem} (batch size {batch_size}); export the step again")
