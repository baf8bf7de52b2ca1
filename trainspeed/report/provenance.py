"""What every figure and table rests on, in words: the commands that produced its rows, the
machines they ran on (each CPU, its cores and its load: "shared machine" where the load exceeded
the cores the process could use) and the files they came from. Every figure written on its own
(`trainspeed plot`) carries the machine lines in its caption too, so no number is read without the
machine and the load it was measured under."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from trainspeed.machine import Machine
from trainspeed.report.page import Provenance
from trainspeed.rows import is_finite

COMMANDS_SHOWN = 3
"""Commands listed under a figure; a sweep of one command per batch size names the rest by count."""
MACHINE_NOT_RECORDED = "machine not recorded (rows converted from files written before rows recorded it)"


def _range(values: list[float], form: str) -> str:
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low}-{high}"


def machine_lines(entries: Iterable[tuple[Machine | None, float | None]]) -> list[str]:
    """One line per machine the rows ran on: its CPU, cores, the load average over the rows' starts
    and ends (and whether it exceeded the usable cores: a shared machine), CPU seconds per wall
    second, threads and versions."""
    groups: dict[tuple, list[tuple[Machine, float | None]]] = {}
    unrecorded = 0
    for machine, cpu in entries:
        if machine is None:
            unrecorded += 1
            continue
        key = (machine.hostname, machine.cpu_model, machine.cores_total, machine.cores_usable, machine.torch_threads,
               machine.torch_version, machine.torch_xla_version, machine.python_version,
               tuple(sorted(machine.thread_variables.items())), machine.note)
        groups.setdefault(key, []).append((machine, cpu))
    lines = []
    for members in groups.values():
        first = members[0][0]
        explained = first.note is not None  # a converted row's note says what was not recorded then
        parts = [first.cpu_model] if first.cpu_model else ([] if explained else ["CPU model not recorded"])
        if first.cores_usable is not None:
            parts.append(f"{first.cores_usable} of {first.cores_total} cores usable")
        elif first.cores_total is not None:
            parts.append(f"{first.cores_total} cores")
        loads = [load for machine, _ in members for load in (machine.load_average_start, machine.load_average_end)
                 if load is not None]
        if loads:
            shared = sum(1 for machine, _ in members if machine.shared)
            parts.append(f"load average {_range(loads, '{:.2f}')}" + (
                f": shared machine (load above the usable cores for {shared} of {len(members)} rows)" if shared else ""))
        elif not explained:
            parts.append("load average not recorded")
        cpus = [cpu for _, cpu in members if is_finite(cpu)]
        if cpus:
            parts.append(f"{_range(cpus, '{:.2f}')} CPU s per wall s")
        if first.torch_threads is not None:
            parts.append(f"{first.torch_threads} torch thread{'s' if first.torch_threads != 1 else ''}")
        parts += [f"{name}={value}" for name, value in sorted(first.thread_variables.items()) if name != "PJRT_DEVICE"]
        parts += [f"torch {first.torch_version}"] if first.torch_version else []
        parts += [f"torch_xla {first.torch_xla_version}"] if first.torch_xla_version else []
        parts += [f"Python {first.python_version}"] if first.python_version else []
        parts += [f"host {first.hostname}"] if first.hostname else []
        parts += [first.note] if first.note else []
        lines.append(f"{len(members)} row{'s' if len(members) != 1 else ''}: " + ", ".join(parts))
    if unrecorded:
        lines.append(f"{unrecorded} row{'s' if unrecorded != 1 else ''}: {MACHINE_NOT_RECORDED}")
    return lines




def row_machine(read: Any) -> tuple[Machine | None, float | None]:
    """A read row's machine and its CPU seconds per wall second (where the row has them)."""
    return getattr(read.row, "machine", None), getattr(read.row, "cpu_s_per_wall_s", None)


def provenance(rows: Sequence[Any], machine: Callable[[Any], tuple[Machine | None, float | None]] = row_machine
               ) -> Provenance:
    commands = list(dict.fromkeys(row.command for row in rows if row.command))
    if len(commands) > COMMANDS_SHOWN:
        commands = commands[:COMMANDS_SHOWN] + [f"… and {len(commands) - COMMANDS_SHOWN} more commands like these "
                                                "(each row's `command` field)"]
    return Provenance(
        commands=commands,
        unrecorded=sum(1 for row in rows if not row.command),
        machines=machine_lines(machine(row) for row in rows),
        sources=list(dict.fromkeys(row.source.path for row in rows)),
    )
