"""The XLA port check: does a workload's training step run whole on an XLA device?

A step ported well to XLA traces into one graph that compiles once and runs on the device with no
help from the host. Three things break that, and torch_xla counts each: an op it cannot lower runs
on the host (an aten fallback, which copies its tensors there and back), a graph that changes
between steps compiles again, and a value read on the host (`.item()`, `float(loss)`, a Python `if`
on a tensor) waits for the device and copies. The check builds the workload on an `xla:*` target
through the same Target API the bench uses, runs warm-up steps, then counts those three over the
measured steps (the target's timed-window hooks, as in every bench row). For each op that fell
back it runs one more step under a dispatch mode that notes the Python line calling it, since the
counter names the op but not where the workload called it. A part of the check that runs long (XLA
compiling a large graph for minutes) says so on stderr while it runs, and compiling for longer
than `port_check_rows.LONG_COMPILE_S` in all is a finding of its own.

This module imports no torch until a check runs; its settings are `port_check_config.py`'s.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

from trainspeed.errors import UsageError
from trainspeed.bench.port_check_config import JAX_DEVICE, XLA_DEVICE, PortCheckConfig, check_xla_target
from trainspeed.bench.port_check_rows import PORTED, FallbackOp, PortCheck, duration, verdict
from trainspeed.machine import Machine
from trainspeed.own_code import machinery

if TYPE_CHECKING:  # the check needs torch when it runs; its config and result do not
    from trainspeed.bench.timing import BatchSource
    from trainspeed.targets.base import Target
    from trainspeed.workloads.base import Trainable

MAX_CALLERS = 5
"""Python lines kept per fallback op: the first few distinct callers point at the fix."""
PROGRESS_AFTER_S = 30.0
"""A part of the check (the build, a warm-up step, the measured steps) that runs longer says so on
stderr, and again every PROGRESS_EVERY_S: XLA compiles a large graph for minutes, and says
nothing until its own "Very slow compile?" alarm."""
PROGRESS_EVERY_S = 60.0


def check_out(path: Path | None) -> None:
    """Before running: `--out` names a new file in a writable folder (a check result is one document,
    written whole; an existing file is someone's earlier result and is left alone)."""
    from trainspeed.atomic import check_writable_directory

    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory; name a JSON file in it, e.g. {path / 'port-check.json'}")
    if path.exists() or path.is_symlink():
        raise UsageError(f"--out {path} already exists; give a new path (a check result is never written over)")
    check_writable_directory(path.parent, f"--out {path}")


def find_callers(target: Target, trainable: Trainable, next_batch: BatchSource, ops: set[str]) -> dict[str, list[str]]:
    """Run one step noting, for every op named in `ops` (`aten::NAME`), the workload lines that
    called it. The step is a real training step, run after the measured ones."""
    import torch
    import torch_xla

    from trainspeed.workloads.dispatch_modes import SerialDispatchMode

    workload_code = machinery(torch, torch_xla)
    callers: dict[str, list[str]] = {op: [] for op in ops}

    class CallerRecorder(SerialDispatchMode):
        """Sees every aten op below autograd; notes where the named ones came from."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = getattr(getattr(func, "_overloadpacket", None), "_qualified_op_name", None)
            if name in callers:
                caller = workload_code.workload_line(traceback.extract_stack())
                if caller and caller not in callers[name] and len(callers[name]) < MAX_CALLERS:
                    callers[name].append(caller)
            return func(*args, **(kwargs or {}))

    with CallerRecorder():
        target.run_step(trainable, next_batch())
    target.sync()
    return callers


def compile_totals() -> tuple[int, float]:
    """Graphs XLA has compiled in this process, and the seconds it spent compiling them."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")
    return (int(data[0]), float(data[1]) / 1e9) if data else (0, 0.0)


class Progress:
    """Says on `stream` what a part of the check is doing once it has run PROGRESS_AFTER_S, and
    again every PROGRESS_EVERY_S until it ends, with what XLA has compiled so far (`compiled`:
    graphs and seconds, read while the part runs: XLA compiles without holding Python's lock)."""

    def __init__(self, compiled: Callable[[], tuple[int, float]], stream: TextIO | None = None,
                 after_s: float = PROGRESS_AFTER_S, every_s: float = PROGRESS_EVERY_S) -> None:
        self.compiled = compiled
        self.stream = stream
        self.after_s = after_s
        self.every_s = every_s

    def line(self, doing: str, elapsed_s: float, before: tuple[int, float]) -> str:
        graphs, seconds = self.compiled()
        return (f"check: still {doing} after {duration(elapsed_s)}; XLA compiles a step's graph the first time it "
                f"runs it (graphs compiled since this began: {graphs - before[0]}, in {duration(seconds - before[1])})")

    @contextlib.contextmanager
    def part(self, doing: str) -> Iterator[None]:
        ended = threading.Event()
        started, before = time.monotonic(), self.compiled()

        def watch() -> None:
            wait_s = self.after_s
            while not ended.wait(wait_s):
                print(self.line(doing, time.monotonic() - started, before), file=self.stream or sys.stderr, flush=True)
                wait_s = self.every_s

        watcher = threading.Thread(target=watch, daemon=True, name="trainspeed-check-progress")
        watcher.start()
        try:
            yield
        finally:
            ended.set()
            watcher.join()


class StepFailed(Exception):
    """The workload's step raised on the target: no counts to read (the command says why, exit 1)."""


def run_port_check(config: PortCheckConfig) -> PortCheck:
    """Build, warm up, count over the measured steps, find the callers of what fell back."""
    from trainspeed.bench.feed import make_feed
    from trainspeed.targets import check_target_builds, get_target
    from trainspeed.workloads import get_workload, resolve_size

    check_xla_target(config.target)
    workload = get_workload(config.workload)
    size = resolve_size(workload, config.size)
    if config.target.strip().split(":")[0] == JAX_DEVICE:
        from trainspeed.bench.jax_port_check import run_lowering_check

        return run_lowering_check(config, workload, size)
    target = get_target(config.target)  # registers the XLA device before any backward in this process
    if target.device_type != XLA_DEVICE:
        raise UsageError(f"check: --target {config.target} runs on {target.device_type or 'another device'}, not XLA")
    check_target_builds(config.target, workload)
    machine = Machine.at_start()
    timestamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    from trainspeed.targets.xla import PortStats, read_counters

    before_build = read_counters()
    compiled_before = compile_totals()
    progress = Progress(compile_totals)
    what = f"{workload.name} {size} on {config.target}"
    try:
        with progress.part(f"building {what}"):
            trainable = target.build(workload, size, config.seed)
            feed = make_feed("device", target, workload, size, config.batch_size, config.seed)
        for step in range(config.warmup_steps):
            with progress.part(f"running warm-up step {step + 1} of {config.warmup_steps} of {what}"):
                target.run_step(trainable, feed.next_batch())
        with progress.part(f"running the measured steps of {what}"):
            target.sync()  # the warm-up's last step ends here
            target.start_timed_windows()
            for _ in range(config.steps):
                loss = target.run_step(trainable, feed.next_batch())
            target.sync()
            target.end_timed_windows(config.steps)
        fields = target.row_fields()
        per_step: dict[str, float] = fields.get("xla_fallback_ops") or {}
        with progress.part(f"running the step that finds what called the ops that fell back in {what}"):
            callers = find_callers(target, trainable, feed.next_batch, set(per_step)) if per_step else {}
        final_loss = float(loss)
    except Exception as error:  # noqa: BLE001 - the workload's own failure, told in one line
        lines = str(error).strip().splitlines()
        fell_back = sorted(PortStats.between(before_build, read_counters(), 1).fallback_ops)
        after = f" (ops run on the host before it failed: {', '.join(fell_back)})" if fell_back else ""
        raise StepFailed(f"check: a step of {workload.name} {size} failed on {config.target}: "
                         f"{type(error).__name__}: {lines[0][:300] if lines else ''}{after}") from error
    compile_s = compile_totals()[1] - compiled_before[1]
    fallbacks = [FallbackOp(op, count, callers.get(op, [])) for op, count in sorted(per_step.items())]
    compiles = int(fields.get("xla_compiles_in_window") or 0)
    transfers = float(fields.get("xla_device_to_host_per_step") or 0.0)
    said = verdict(fallbacks, compiles, transfers, compile_s)
    return PortCheck(
        timestamp=timestamp, workload=workload.name, size=size, target=str(target), device_name=target.device_name(),
        batch_size=config.batch_size, warmup_steps=config.warmup_steps, steps=config.steps, fallback_ops=fallbacks,
        compiles_in_steps=compiles, device_to_host_per_step=transfers, final_loss=final_loss, verdict=said,
        ported=said == PORTED, command=config.command, machine=machine.at_end(), compile_s=compile_s,
    )


def write_check(path: Path, check: PortCheck) -> None:
    """The result as one JSON document (kind, schema version, fields), written whole to a new file:
    `check_out` found the path free before the check ran, and a file made there since (the user's,
    or another check's) is refused in one line, never replaced."""
    import json

    from trainspeed.atomic import create_exclusive_text
    from trainspeed.rows import row_record

    create_exclusive_text(path, json.dumps(row_record(check), indent=2) + "\n", f"--out {path}")

