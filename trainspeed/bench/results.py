"""Bench rows: one per (target, batch size, feed), appended to JSONL as they are measured, exported
to CSV.

`ResultRow` is the row every bench writes: `trainspeed bench`, the studies built on it and the
reference peers in `benchmarks/reference/`. A measured row is made from its `Timing` in one place
(`measured_row`), so samples/s means the same (the median timed window) whoever measured it. A
row of a remote target is a bench row too: the remote fields say how its steps crossed the wire.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from trainspeed.atomic import atomic_write_shown_text, check_writable_directory
from trainspeed.errors import UsageError
from trainspeed.machine import Machine
from trainspeed.rows import append_row as append_record
from trainspeed.rows import Batch, Loss, NonNegative, Positive, parse_row, read_records, record_kind
from trainspeed.user_files import regular_file_problem
from trainspeed.user_json import check_rows_file

if TYPE_CHECKING:  # the rows are read where no torch is imported (the report); timing needs torch
    from trainspeed.bench.timing import Timing

STATUSES = ("ok", "invalid", "oom", "skipped", "error")
"""ok: measured; invalid: measured but a compilation happened inside a timed window;
oom: the configuration ran out of memory; skipped: not run, a smaller batch already ran out of
memory on this target; error: failed for another reason (see `error`)."""


@dataclass(frozen=True)
class ResultRow:
    KIND: ClassVar[str] = "bench"
    SCHEMA_VERSION: ClassVar[int] = 1

    run_id: str
    """One bench invocation (or several commands measured as one comparison, `--run-id`): ratios
    pair only rows of one run."""
    timestamp: str
    workload: str
    size: str
    target: str
    batch_size: Batch
    status: str
    workload_module: str | None = None
    """Where the workload is defined, its declared version and a hash of its definition
    (`trainspeed.workloads.identity`): two workloads of one name never share a line or a ratio."""
    workload_version: str | None = None
    workload_sha256: str | None = None
    feed: str | None = None
    """"device": one batch kept on the device (no data IO); "host": each step copies the next of a
    few host batches to the device inside the timed step; "data": each step's batch is read from
    `data` by a training rank's loader and copied inside the timed step."""
    bytes_per_step: int | None = None
    """Host-to-device bytes each timed step copies (0 with the device feed)."""
    data: str | None = None
    """The `--data` the data feed read, as given (None: a synthetic feed)."""
    data_format: str | None = None
    """What it is (`trainspeed.data.sources`: shards, image-folder, tokens, hf-dataset, webdataset)."""
    data_files: int | None = None
    data_samples: int | None = None
    """Training samples of the data the loader reads from."""
    data_fingerprint: str | None = None
    """The content fingerprint a training run's summary records of the same data."""
    data_workers: int | None = None
    """Loader worker processes that read it (0: the bench's own process)."""
    data_skipped: int | None = None
    """Unreadable samples skipped while the configuration ran (--bad-samples skip)."""
    noise_scale: str | None = None
    """The noise-scale meter's method when the steps also measured it (`previous-step`); None: off."""
    samples_per_s: Positive | None = None
    """Median over the timed windows."""
    samples_per_s_min: Positive | None = None
    samples_per_s_max: Positive | None = None
    step_time_s: Positive | None = None
    first_step_s: NonNegative | None = None
    """The first step alone, including any compilation."""
    windows: int | None = None
    steps_per_window: int | None = None
    window_s: list[NonNegative] | None = None
    """Real seconds of every timed window (synced start to synced end)."""
    min_window_s: NonNegative | None = None
    """The minimum window length asked for (--min-window-s)."""
    probe_step_s: NonNegative | None = None
    """One synced step after the warm-up, which the first guess of steps per window came from."""
    window_restarts: int | None = None
    """How often a window shorter than min_window_s made the windows start again with more steps."""
    steps_capped: bool | None = None
    """True when the cap on steps per window left a window shorter than min_window_s."""
    cpu_s_per_wall_s: NonNegative | None = None
    """Process CPU seconds per wall second over the windows: about the busy threads (below 1: the
    process waited, for the device or for a core other jobs held)."""
    warmup_steps: int | None = None
    compiles_in_windows: int | None = None
    compiles_before: int | None = None
    """Configurations of a compiling target (any mode but eager) this bench process measured before
    this one. 0: this row's first step also held the compiler's start-up in the process (importing
    it, starting its workers), which every training run pays at its first graph and a later row
    does not. None on an eager target, and in older rows."""
    peak_memory_bytes: int | None = None
    """Peak memory of the configuration (build and steps), as `peak_memory_source` measured it."""
    peak_memory_source: str | None = None
    """"cuda max_memory_allocated", "host RSS growth" (a CPU target: the process's resident memory
    above what it held before the configuration), or None (XLA's peak_bytes_used, or not measured)."""
    peak_memory_reserved_bytes: int | None = None
    """CUDA: the caching allocator's reserved peak, which the device had to hold."""
    final_loss: Loss | None = None
    flops_per_sample: NonNegative | None = None
    """The FLOPs per sample achieved_tflops and MFU are computed from (see mfu_flops_source)."""
    flops_per_sample_declared: NonNegative | None = None
    """The workload's own flops_per_sample."""
    flops_per_sample_counted: NonNegative | None = None
    """torch's FlopCounterMode on one host training step, per sample (bench/flops.py says what it sees)."""
    mfu_flops_source: str | None = None
    """Which of the two flops_per_sample is: "declared". None in rows written before the check."""
    achieved_tflops: NonNegative | None = None
    """TFLOP/s per device: samples/s x flops_per_sample, over `devices` where a step ran on several."""
    peak_tflops: NonNegative | None = None
    """The peak MFU divides by, as peak_tflops_source says which."""
    peak_tflops_source: str | None = None
    """"nominal": the chip's published dense peak in the row's precision (`bench/nominal_peaks.py`;
    nominal_peak_chip and nominal_peak_source name it), as the field counts MFU; "measured": the
    matmul chain measured on the device (measured_peak_tflops), where no nominal peak is known (any
    CPU), and in every row written before the nominal peaks; "given": --peak-tflops."""
    mfu: NonNegative | None = None
    """achieved_tflops / peak_tflops; None when there is no peak or the peak was refused."""
    peak_refused: str | None = None
    """Why MFU is None although a peak exists: a peak below the achieved TFLOP/s cannot be a peak."""
    nominal_peak_chip: str | None = None
    """Where peak_tflops_source is "nominal": the table's entry it is, chip and precision
    (`TPU v5e bf16`). None for any other source, and in rows written before the nominal peaks."""
    nominal_peak_source: str | None = None
    """Where that figure is printed: the vendor's document with its URL (and, for an fp32 row on a
    TPU, why it is the bf16 figure)."""
    measured_peak_tflops: NonNegative | None = None
    """The matmul chain measured on the device (`bench/peak.py`; `jaxrt.peak_matmul_tflops` for JAX
    and exported steps), on every row that measured it, whichever peak MFU divides by. None where
    none was measured (--peak-tflops), and in rows written before this field: there peak_tflops is
    the measured chain where peak_tflops_source says "measured"."""
    mfu_of_measured_peak: NonNegative | None = None
    """achieved_tflops / measured_peak_tflops: MFU against the device's own measured ceiling (what
    `mfu` was before the nominal peaks), beside MFU as the field counts it. None where nothing was
    measured or the measured peak is below the achieved TFLOP/s."""
    device_name: str | None = None
    machine: Machine | None = None
    """The machine, its cores and its load while this configuration was measured."""
    transport: str | None = None
    """How steps reached a device elsewhere ("grpc" for the remote family); None: a local device."""
    link: str | None = None
    """What lay between this process and that device: "loopback", an emulated link (its rate and
    delay), or a label the user gave."""
    in_flight: int | None = None
    """Steps sent ahead of their results (1: synchronous, each step waits for the one before)."""
    bytes_sent_per_step: int | None = None
    """Median bytes each step sent to the remote device (the batch with the host feed)."""
    bytes_received_per_step: int | None = None
    server_step_s: NonNegative | None = None
    """The step time the remote device measured itself, over the same steps as step_time_s (the
    median over the timed windows of the server's seconds per step in each); client step - server
    step = wire time."""
    server_window_s: list[NonNegative] | None = None
    """The remote device's own seconds in each timed window (the sum over its steps), paired with
    window_s: no window's server time can exceed the client's."""
    wire_time_suspect: bool | None = None
    """True when server_step_s exceeds the client's step time over the same windows, which the
    pairing rules out: the row's wire time is not to be trusted."""
    xla_fallback_ops: dict[str, NonNegative] | None = None
    """XLA targets: aten op name -> how often per timed step torch_xla ran it on the host (it has
    no lowering, or `aten::_local_scalar_dense`: an `.item()`); only ops that fell back, {} when
    none did. None: not an XLA row, or written before the port check."""
    xla_compiles_in_window: int | None = None
    """XLA targets: graph compilations inside the kept timed windows (a well-ported step compiles
    only before them)."""
    xla_device_to_host_per_step: NonNegative | None = None
    """XLA targets: device-to-host transfers per timed step (a host sync each; 0 when ported)."""
    jax_versions: str | None = None
    """JAX targets and exported steps: `jax X, jaxlib Y[, libtpu Z]` the step ran with."""
    compile_s: NonNegative | None = None
    """JAX targets and exported steps: seconds to compile the step's program for this batch shape
    (ahead of the first step, which first_step_s times apart)."""
    exported: str | None = None
    """Exported steps: the artifact's folder and the sha256 of its manifest (`trainspeed export`)."""
    micro_batches: int | None = None
    """Exported steps: how many equal slices of the batch each step accumulated its gradient over
    before its update (`export --micro-batch-size`); None: the batch in one pass."""
    devices: Batch | None = None
    """Exported steps of `export --devices N`: the devices of the mesh each step ran over, data
    parallel (batch_size is the global batch, batch_size / N each device's; MFU is per device, and
    program_flops, bytes and memory are one device's program). None: one device, no mesh."""
    program_flops: NonNegative | None = None
    """JAX targets and exported steps: the FLOPs of one step as XLA counts its compiled program; for
    an exported step of several programs (a phased workload's, one per list of phases), their mean
    over one cycle of steps. XLA counts a loop's body once, so a program whose loops run more than
    once (`program_loop_trips`: a step over micro-batches, scanned layers) has none: rows written
    before that rule hold one pass of each loop (a step over micro-batches, `micro_batches`, counted
    one micro-batch's forward and backward beside its update)."""
    program_bytes_accessed: NonNegative | None = None
    """JAX targets and exported steps: the bytes one step's program reads and writes, as XLA
    counts them (memory traffic; with program_flops, whether the step is compute- or memory-bound);
    averaged and left out as program_flops is."""
    program_loop_trips: list[int] | None = None
    """JAX targets and exported steps: the trip count of each loop (`while`) in the step's compiled
    program(s), 0 where XLA does not know it; None: no loop, or written before rows said."""
    program_temp_bytes: NonNegative | None = None
    """JAX targets and exported steps: the temporary buffers the step's program needs beside its
    arguments and outputs (activations kept for the backward pass, among them); for an exported step
    of several programs, the largest (what must fit), as for the other memory fields below."""
    program_argument_bytes: NonNegative | None = None
    """JAX targets and exported steps: XLA's memory analysis of the compiled step, its arguments'
    buffers (the state, the batch, the learning rates). With the outputs, the temporaries and the
    aliases it is what the program holds on the device by XLA's count, beside peak_memory_bytes,
    the runtime's peak."""
    program_output_bytes: NonNegative | None = None
    """JAX targets and exported steps: the buffers of the step's outputs (the new state, the loss)."""
    program_alias_bytes: NonNegative | None = None
    """JAX targets and exported steps: output bytes that reuse an argument's buffer (the donated
    state), counted in both program_argument_bytes and program_output_bytes but held once."""
    program_generated_code_bytes: NonNegative | None = None
    """JAX targets and exported steps: the compiled program's own code, as XLA reports it (the CPU
    backend reports 0)."""
    error: str | None = None
    command: str | None = None
    """The command line that wrote the row."""

    @property
    def is_measured(self) -> bool:
        return self.status in ("ok", "invalid") and self.samples_per_s is not None

    @property
    def is_remote(self) -> bool:
        return self.transport is not None

    @property
    def series(self) -> str:
        """The name of this row's line in tables and plots: the target, plus its mesh's devices
        where it ran on one (`export --devices N`), the feed when the steps were host-fed and the
        noise-scale meter when they measured it."""
        target = self.target if self.devices is None else f"{self.target} mesh x{self.devices}"
        name = target if self.feed in (None, "device") else f"{target} {self.feed}-fed"
        return name if self.noise_scale is None else f"{name} +noise-scale"

    @property
    def xla_port_findings(self) -> list[str] | None:
        """What the timed steps of an XLA row did that a well-ported step does not, each in a few
        words ([] when nothing); None where the row has no port counts (another device, not
        measured, or written before they were recorded)."""
        if self.xla_fallback_ops is None and self.xla_compiles_in_window is None \
                and self.xla_device_to_host_per_step is None:
            return None
        findings = [f"fallback {name} {count:.3g}/step" for name, count in sorted((self.xla_fallback_ops or {}).items())]
        if self.xla_compiles_in_window:
            findings.append(f"{self.xla_compiles_in_window} compiles in windows")
        if self.xla_device_to_host_per_step:
            findings.append(f"{self.xla_device_to_host_per_step:.3g} host syncs/step")
        return findings

    @property
    def wire_s(self) -> float | None:
        """Client step minus the server's own step: what the wire added to a remote step. None
        where that difference is no wire time: not remote, not measured, flagged, or negative."""
        if self.step_time_s is None or self.server_step_s is None or self.wire_time_suspect:
            return None
        wire = self.step_time_s - self.server_step_s
        return wire if wire >= 0 else None

    @property
    def wire_flagged(self) -> bool:
        """A remote row whose wire time cannot be read: flagged by its writer, or negative."""
        if self.step_time_s is None or self.server_step_s is None:
            return False
        return bool(self.wire_time_suspect) or self.step_time_s < self.server_step_s


FIELDS = [field.name for field in dataclasses.fields(ResultRow)]


def measured_row(base: ResultRow, timing: Timing, *, min_window_s: float | None, warmup_steps: int,
                 **fields: Any) -> ResultRow:
    """`base` with what `timing` measured: samples/s of the median window, the slowest and the
    fastest, every window's length; `ok`, or `invalid` when a compilation happened inside a window.
    `fields` are further measurements of the same configuration (bytes per step, peak memory)."""
    per_second = [base.batch_size / step_s for step_s in timing.step_times_s]
    return dataclasses.replace(
        base,
        status="ok" if timing.compiles_in_windows == 0 else "invalid",
        samples_per_s=base.batch_size / timing.median_step_s,
        samples_per_s_min=min(per_second),
        samples_per_s_max=max(per_second),
        step_time_s=timing.median_step_s,
        first_step_s=timing.first_step_s,
        windows=len(timing.window_s),
        steps_per_window=timing.steps_per_window,
        window_s=list(timing.window_s),
        min_window_s=min_window_s,
        probe_step_s=None if math.isnan(timing.probe_step_s) else timing.probe_step_s,
        window_restarts=timing.restarts,
        steps_capped=timing.steps_capped,
        cpu_s_per_wall_s=timing.cpu_s_per_wall_s,
        warmup_steps=warmup_steps,
        compiles_in_windows=timing.compiles_in_windows,
        final_loss=timing.final_loss,
        **fields,
    )


def check_results_file(path: Path) -> None:
    """Before measuring: the file passes every writer's check of the rows file it appends to
    (`check_rows_file`: a regular file of bench rows only), the folder is writable, and the rows
    there read as bench rows (a corrupt or cut line is named now, not after minutes of measuring)."""
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory; name a results file in it, e.g. {path / 'bench.jsonl'}")
    check_rows_file(path, f"--out {path}", kinds=(ResultRow.KIND,))
    check_writable_directory(path.parent, f"--out {path}")
    if path.exists():
        read_rows(path)


def append_row(path: Path, row: ResultRow, extra: dict[str, Any] | None = None) -> None:
    """Append one bench row; `extra` holds a script's own fields beside the row's."""
    append_record(path, row, extra)


def read_rows(path: Path) -> list[ResultRow]:
    """The bench rows of a results file; a line that is no bench row is an error naming the line."""
    problem = regular_file_problem(path)
    if problem == "no such file":
        raise UsageError(f"results file {path} does not exist; run `trainspeed bench ... --out {path}` first")
    if problem is not None:
        raise UsageError(f"results file {path} {problem}; give the JSONL file of rows `trainspeed bench --out` wrote")
    rows = []
    for record, source in read_records(path):
        kind, _ = record_kind(record, source)
        if kind != ResultRow.KIND:
            raise UsageError(f"{source}: a {kind!r} row, not a bench row; `trainspeed report` reads every kind")
        row, _ = parse_row(ResultRow, record, source)
        if row.status not in STATUSES:
            raise UsageError(f"{source}: unknown status {row.status!r} (one of {', '.join(STATUSES)})")
        rows.append(row)
    return rows


def _flat(row: ResultRow) -> dict[str, Any]:
    """The row's fields with the machine's spread out as `machine.NAME` columns."""
    record = dataclasses.asdict(row)
    machine = record.pop("machine") or {}
    if record["xla_fallback_ops"] is not None:  # a mapping in one cell, as JSON rather than Python's repr
        record["xla_fallback_ops"] = json.dumps(record["xla_fallback_ops"], sort_keys=True)
    record.update({f"machine.{name}": value for name, value in machine.items()})
    return record


def write_csv(path: Path, rows: list[ResultRow]) -> None:
    buffer = io.StringIO()
    names = [name for name in FIELDS if name != "machine"] + [f"machine.{f.name}" for f in dataclasses.fields(Machine)]
    writer = csv.DictWriter(buffer, fieldnames=names)
    writer.writeheader()
    for row in rows:
        writer.writerow(_flat(row))
    atomic_write_shown_text(path, buffer.getvalue())
