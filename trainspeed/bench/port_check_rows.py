"""What a port check found, as `trainspeed check` prints it and `--out` writes it: the row kind
`xla-port-check`, which the report reads (`port_check_report.py`). No torch here: reading and
drawing rows import none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from trainspeed.machine import Machine

HOST_SCALAR_OP = "aten::_local_scalar_dense"
"""The op torch_xla counts as a fallback when the host reads a device scalar (`.item()`,
`float(t)`, `bool(t)`): a host sync rather than a missing lowering."""
PORTED = "ported: no fallback, no recompiles, no host syncs in steady state"
LONG_COMPILE_S = 60.0
"""Compiling longer than this over a check is a finding: a step's graph that large (a Python loop
over time steps, an RNN unrolled step by step) costs as much again on every new shape."""


def duration(seconds: float) -> str:
    """`45 s`, `2 min 5 s`."""
    whole = int(round(seconds))
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


@dataclass(frozen=True)
class FallbackOp:
    op: str
    """torch_xla's counter name, `aten::NAME`."""
    per_step: float
    """How often it fell back per measured step."""
    called_from: list[str] = field(default_factory=list)
    """`file:line in function: code` of the workload's lines that called it (innermost frame outside
    torch, torch_xla and trainspeed's own machinery); empty where no Python line called it (an op
    of the backward pass, or one torch itself issues)."""

    @property
    def is_host_read(self) -> bool:
        return self.op == HOST_SCALAR_OP


@dataclass(frozen=True)
class PortCheck:
    """One port check's result, as printed and as `--out` writes it."""

    KIND: ClassVar[str] = "xla-port-check"
    SCHEMA_VERSION: ClassVar[int] = 1

    timestamp: str
    workload: str
    size: str
    target: str
    device_name: str
    batch_size: int
    warmup_steps: int
    steps: int
    fallback_ops: list[FallbackOp]
    compiles_in_steps: int
    """Compilations during the measured steps."""
    device_to_host_per_step: float
    final_loss: float | None
    verdict: str
    ported: bool
    command: str | None = None
    machine: Machine | None = None
    compile_s: float | None = None
    """Seconds XLA spent compiling over the whole check (the warm-up's compiles included); None in
    checks written before it was recorded."""
    lowered_for: str | None = None
    """A `jax` target's check: the platform the step was lowered for, here, without its device
    (`trainspeed.targets.jaxjit.lowering`); its fallback ops are ops with no JAX lowering, its
    compiles the programs a step would add, and its host syncs the host reads that stopped the
    trace. None: a check of steps run on an XLA device."""

    def lines(self) -> list[str]:
        """The report a user reads: each fallback with its callers, compiles, transfers, the verdict."""
        if self.lowered_for is not None:
            return self._lowering_lines()
        out = [f"port check: {self.workload} {self.size} on {self.target} ({self.device_name}), batch {self.batch_size}, "
               f"{self.warmup_steps} warm-up steps, then {self.steps} measured"]
        if self.fallback_ops:
            out.append("ops run on the host (aten fallback), per measured step:")
            for op in self.fallback_ops:
                note = "  (.item()/float()/bool() of a device tensor: a host sync)" if op.is_host_read else ""
                out.append(f"  {op.op}: {op.per_step:g}{note}")
                out += [f"    called from {caller}" for caller in op.called_from]
                if not op.called_from:
                    out.append("    called from no Python line of the workload (the backward pass, or torch itself)")
        else:
            out.append("ops run on the host (aten fallback): none")
        out.append(f"compiles in the measured steps: {self.compiles_in_steps}")
        if self.compile_s is not None:
            out.append(f"time compiling, warm-up included: {duration(self.compile_s)}")
        transfers = f"device-to-host transfers per step: {self.device_to_host_per_step:g}"
        if self.device_to_host_per_step and any(not op.is_host_read for op in self.fallback_ops):
            transfers += " (each fallback copies its inputs to the host)"
        out.append(transfers)
        out.append(f"verdict: {self.verdict}")
        return out


    def _lowering_lines(self) -> list[str]:
        out = [f"port check: {self.workload} {self.size} on {self.target}, lowered for {self.lowered_for} on "
               f"{self.device_name}, batch {self.batch_size}, the step traced twice"]
        if self.fallback_ops:
            out.append("ops with no JAX lowering (torchax), each replaced by a stand-in so the trace went on:")
            for op in self.fallback_ops:
                out.append(f"  {op.op}")
                out += [f"    called from {caller}" for caller in op.called_from]
                if not op.called_from:
                    out.append("    called from no Python line of the workload (the backward pass, or torch itself)")
        else:
            out.append("ops with no JAX lowering: none")
        out.append(f"programs compiled again per step: {self.compiles_in_steps}"
                   + (" (a Python value that changes per step is compiled into the step)" if self.compiles_in_steps else ""))
        out.append(f"verdict: {self.verdict}")
        return out


def _counted(count: float, noun: str) -> str:
    """`1 host sync`, `2 host syncs`, `0.5 host syncs`."""
    return f"{count:g} {noun}" if count == 1 else f"{count:g} {noun}s"


def verdict(fallbacks: list[FallbackOp], compiles: int, transfers_per_step: float,
            compile_s: float | None = None) -> str:
    """One line: ported, or each thing that is wrong."""
    wrong = []
    lowered = [op.op for op in fallbacks if not op.is_host_read]
    if lowered:
        falls = "falls" if len(lowered) == 1 else "fall"
        wrong.append(f"{_counted(len(lowered), 'op')} {falls} back to the host ({', '.join(lowered)})")
    if compiles:
        wrong.append(f"{_counted(compiles, 'recompile')} in the measured steps (a shape or a Python value changes "
                     "between steps)")
    if transfers_per_step:
        reads = " (.item() or the like)" if any(op.is_host_read for op in fallbacks) else ""
        wrong.append(f"{_counted(transfers_per_step, 'host sync')} per step{reads}")
    if compile_s is not None and compile_s > LONG_COMPILE_S:
        wrong.append(f"compiling took {duration(compile_s)} (a graph this large, as a Python loop over time steps or "
                     "an RNN unrolled step by step makes, compiles again on every new shape)")
    return PORTED if not wrong else "not ported: " + "; ".join(wrong)
