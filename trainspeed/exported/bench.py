"""`trainspeed bench --exported DIR`: the bench of exported steps, where only JAX and numpy are.

It times the deserialized programs with the bench's own timing (`trainspeed.bench.timing`: first
step apart, warm-up, synced windows, the median) and writes the bench's own rows, so `report`,
`plot` and `plan` read them beside every other target's. The rows' target is the one exported
(`jax:jit:bf16`), their `exported` field names the folder and its manifest's sha256, and their
`device_name` is this machine's JAX device (`TPU v5 lite`).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import sys
import uuid
from typing import Any, Callable

from trainspeed import jaxrt
from trainspeed.bench.config import BenchConfig
from trainspeed.bench.mfu import Peaks, with_flops
from trainspeed.nominal_peaks import jax_matmul_precision, nominal_peak
from trainspeed.bench.results import ResultRow, append_row, check_results_file, measured_row
from trainspeed.bench.timing import time_training
from trainspeed.errors import UsageError
from trainspeed.exported.load import ExportedSteps
from trainspeed.exported.manifest import MANIFEST, Manifest
from trainspeed.machine import Machine

EXPORTED_FEEDS = ("device", "host")


class ExportedDevice:
    """What the bench's timing asks of a target, for exported programs: run a step, sync, count
    compilations. The state lives here and each step replaces it (the programs donate it)."""

    def __init__(self, steps: ExportedSteps, batch_size: int) -> None:
        self.steps, self.batch_size = steps, batch_size
        self.program = steps.train_program(batch_size)
        self.state = steps.initial_state()
        self.learning_rates = steps.learning_rates()
        self.last_loss: Any = None
        self.step = 0
        """Steps run: a phased workload's step runs the program of its phases (StyleGAN3's R1 every 16th)."""

    def run_step(self, trainable: Any, batch: list[Any]) -> Any:
        self.program = self.steps.train_program(self.batch_size, self.step)
        self.state, self.last_loss = self.program(self.state, batch, self.learning_rates)
        self.step += 1
        return self.last_loss

    def compile_s(self) -> float | None:
        """Seconds compiling every training program of the size (a phased workload has several)."""
        seconds = [programs.last_compile_s() for programs in self.steps.train_programs(self.batch_size)]
        return sum(value for value in seconds if value is not None) if any(v is not None for v in seconds) else None

    def sync(self) -> None:
        import jax

        jax.block_until_ready(self.state)

    def compile_count(self) -> int:
        return sum(programs.count for programs in self.steps.train_programs(self.batch_size))

    def start_timed_windows(self) -> None:
        """Nothing to count beyond compilations."""

    def end_timed_windows(self, steps: int) -> None:
        """Nothing to count beyond compilations."""


def _batch_source(steps: ExportedSteps, batch_size: int, feed: str) -> tuple[Callable[[], list[Any]], int]:
    """Each step's batch and the host-to-device bytes it copies: the device feed puts one batch on
    the device once; the host feed copies the host batch inside every timed step."""
    host = steps.host_batch(batch_size)
    if feed == "device":
        placed = steps.on_devices(host)
        return (lambda: placed), 0
    return (lambda: steps.on_devices(host)), sum(c.nbytes for c in host)


def batch_sizes_of(config: BenchConfig, steps: ExportedSteps, given: bool) -> list[int]:
    """The exported sizes, or those of --batch-sizes, each of which must have been exported."""
    if not given:
        return steps.manifest.batch_sizes
    for batch_size in config.batch_sizes:
        steps.manifest.program(batch_size)
    return list(config.batch_sizes)


def _micro_batches(manifest: Manifest, batch_size: int) -> int | None:
    """The micro-batches the exported step of `batch_size` accumulates over (None: one pass)."""
    program = next(program for program in manifest.programs if program.batch_size == batch_size)
    return program.micro_batches if program.micro_batches > 1 else None


def run_exported_bench(config: BenchConfig, batch_sizes_given: bool) -> list[ResultRow]:
    assert config.exported is not None
    check_results_file(config.out)
    if set(config.feeds) - set(EXPORTED_FEEDS):
        raise UsageError("--exported: the feeds are device and host (the exported batch; --feed data reads the data "
                         "through a workload's loader, which needs torch)")
    workload = None if config.workload == BenchConfig.workload else config.workload
    steps = ExportedSteps.open(config.exported, workload)
    manifest = steps.manifest
    sizes = batch_sizes_of(config, steps, batch_sizes_given)
    steps.verify(sizes)
    manifest_sha = hashlib.sha256((config.exported / MANIFEST).read_bytes()).hexdigest()
    run_id = config.run_id or uuid.uuid4().hex[:12]
    peaks = Peaks(given=config.peak_tflops) if config.peak_tflops else Peaks(nominal=nominal_peak(
        jaxrt.device_name(), jax_matmul_precision(manifest.precision, jaxrt.device().platform)))
    rows = []
    out_of_memory_at: dict[str, int] = {}  # per feed: the batch that ran out; larger ones are skipped
    for batch_size in sizes:
        for feed in config.feeds:
            print(f"exported {manifest.target} batch {batch_size} feed {feed} ...", file=sys.stderr, flush=True)
            base = ResultRow(
                run_id=run_id, timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                workload=manifest.workload, size=manifest.size, target=manifest.target, batch_size=batch_size,
                status="skipped", feed=feed, workload_module=manifest.workload_module,
                workload_version=manifest.workload_version, workload_sha256=manifest.workload_sha256,
                flops_per_sample=manifest.flops_per_sample, flops_per_sample_declared=manifest.flops_per_sample,
                mfu_flops_source="declared", device_name=jaxrt.device_name(), jax_versions=jaxrt.versions(),
                exported=f"{config.exported} (manifest sha256 {manifest_sha[:16]})", command=config.command,
                machine=Machine.at_start(), micro_batches=_micro_batches(manifest, batch_size),
                devices=manifest.devices,
            )
            if feed in out_of_memory_at:
                row = dataclasses.replace(base, error=f"batch {out_of_memory_at[feed]} already ran out of memory")
            else:
                row = _measure(steps, batch_size, feed, config, base)
                if row.status == "oom":
                    out_of_memory_at[feed] = batch_size
            if row.is_measured and peaks.wants_measured:
                dtype = "bfloat16" if manifest.precision == "bf16" else "float32"
                peaks = dataclasses.replace(peaks, measured=jaxrt.peak_matmul_tflops(dtype, jaxrt.probe_size()))
            row = with_flops(row, manifest.flops_per_sample, peaks, manifest.program_devices)
            append_row(config.out, row)
            rows.append(row)
    return rows


def _measure(steps: ExportedSteps, batch_size: int, feed: str, config: BenchConfig, base: ResultRow) -> ResultRow:
    machine = base.machine or Machine.at_start()
    try:
        device = ExportedDevice(steps, batch_size)
        next_batch, bytes_per_step = _batch_source(steps, batch_size, feed)
        timing = time_training(device, None, next_batch, config.plan)
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - a failure is a row; out of memory is told apart
        text = str(error).strip().splitlines()
        status = "oom" if jaxrt.is_oom(error) else "error"
        return dataclasses.replace(base, status=status, error=f"{type(error).__name__}: {text[0] if text else ''}"[:500],
                                   machine=machine.at_end())
    peak = jaxrt.peak_memory_bytes()
    return dataclasses.replace(
        measured_row(base, timing, min_window_s=config.plan.min_window_s, warmup_steps=config.plan.warmup_steps,
                     bytes_per_step=bytes_per_step, peak_memory_bytes=peak,
                     peak_memory_source="jax memory_stats peak_bytes_in_use" if peak else None),
        compile_s=device.compile_s(), machine=machine.at_end(), **step_costs(device.steps, batch_size),
    )


MEMORY_FIELDS = tuple(jaxrt.MEMORY_ANALYSIS_FIELDS.values())
PER_STEP_FIELDS = ("program_flops", "program_bytes_accessed")


def step_costs(steps: ExportedSteps, batch_size: int) -> dict[str, Any]:
    """XLA's account of the step a row timed, from the programs compiled for it. One program: its
    costs. A phased workload runs one program per list of phases (StyleGAN3: G+D+R1 one step in 16,
    G+D the others), so a step's FLOPs and bytes accessed are their mean over one cycle of steps,
    each program counted as often as the cycle runs it (none where a program of the cycle was not
    compiled, or its count was left out: `jaxrt.program_costs`), and its memory fields the largest
    of the programs' (what must fit). Loop trip counts are those of every program the cycle runs."""
    manifest = steps.manifest
    cycle = [manifest.phases_of_step(step) for step in range(max(len(manifest.step_phases), 1))]
    loaded = {phases: programs for (kind, size, phases), programs in steps.programs.items()
              if kind == "train" and size == batch_size}
    costs = [loaded[phases].last_costs() if phases in loaded else {} for phases in cycle]
    fields: dict[str, Any] = {}
    for name in PER_STEP_FIELDS:
        if all(name in cost for cost in costs):
            fields[name] = sum(cost[name] for cost in costs) / len(costs)
    for name in MEMORY_FIELDS:
        values = [cost[name] for cost in costs if name in cost]
        if values:
            fields[name] = max(values)
    trips = [trip for phases in dict.fromkeys(cycle) for trip in
             (loaded[phases].last_costs().get("program_loop_trips") or [] if phases in loaded else [])]
    if trips:
        fields["program_loop_trips"] = trips
    return fields
