"""Result rows: one per (target, batch size), appended to JSONL, exported to CSV."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass
from pathlib import Path

from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory
from trainspeed.errors import UsageError

STATUSES = ("ok", "invalid", "oom", "skipped", "error")
"""ok: measured; invalid: measured but a compilation happened inside a timed window;
oom: the configuration ran out of memory; skipped: not run, a smaller batch already ran out of
memory on this target; error: failed for another reason (see `error`)."""


@dataclass
class ResultRow:
    run_id: str
    timestamp: str
    workload: str
    size: str
    target: str
    batch_size: int
    status: str
    feed: str | None = None
    """"device": one batch kept on the device (no data IO); "host": each step copies the next of a
    few host batches to the device inside the timed step. None in rows written before the choice
    existed, which were device-fed."""
    bytes_per_step: int | None = None
    """Host-to-device bytes each timed step copies (0 with the device feed)."""
    samples_per_s: float | None = None
    """Median over the timed windows."""
    samples_per_s_min: float | None = None
    samples_per_s_max: float | None = None
    step_time_s: float | None = None
    first_step_s: float | None = None
    """The first step alone, including any compilation."""
    windows: int | None = None
    steps_per_window: int | None = None
    window_s: list[float] | None = None
    """Real seconds of every timed window (synced start to synced end)."""
    min_window_s: float | None = None
    """The minimum window length asked for (--min-window-s)."""
    probe_step_s: float | None = None
    """One synced step after the warm-up, which the first guess of steps per window came from."""
    window_restarts: int | None = None
    """How often a window shorter than min_window_s made the windows start again with more steps."""
    steps_capped: bool | None = None
    """True when the cap on steps per window left a window shorter than min_window_s."""
    cpu_s_per_wall_s: float | None = None
    """Process CPU seconds per wall second over the windows: about the busy threads (below 1: the
    process waited, for the device or for a core other jobs held)."""
    warmup_steps: int | None = None
    compiles_in_windows: int | None = None
    peak_memory_bytes: int | None = None
    final_loss: float | None = None
    flops_per_sample: float | None = None
    """The FLOPs per sample achieved_tflops and MFU are computed from (see mfu_flops_source)."""
    flops_per_sample_declared: float | None = None
    """The workload's own flops_per_sample."""
    flops_per_sample_counted: float | None = None
    """torch's FlopCounterMode on one host training step, per sample (bench/flops.py says what it sees)."""
    mfu_flops_source: str | None = None
    """Which of the two flops_per_sample is: "declared". None in rows written before the check."""
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    peak_tflops_source: str | None = None
    """"measured" (matmul on the device) or "given" (--peak-tflops)."""
    mfu: float | None = None
    """achieved_tflops / peak_tflops; None when there is no peak or the peak was refused."""
    peak_refused: str | None = None
    """Why MFU is None although a peak exists: a peak below the achieved TFLOP/s cannot be a peak."""
    device_name: str | None = None
    threads: int | None = None
    torch_version: str | None = None
    torch_xla_version: str | None = None
    python_version: str | None = None
    hostname: str | None = None
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
    server_step_s: float | None = None
    """The step time the remote device measured itself, over the same steps as step_time_s (the
    median over the timed windows of the server's seconds per step in each); client step - server
    step = wire time."""
    server_window_s: list[float] | None = None
    """The remote device's own seconds in each timed window (the sum over its steps), paired with
    window_s: no window's server time can exceed the client's."""
    wire_time_suspect: bool | None = None
    """True when server_step_s exceeds the client's step time over the same windows, which the
    pairing rules out: the row's wire time is not to be trusted."""
    error: str | None = None
    command: str | None = None
    """The command line that wrote the row (None in rows written before rows recorded it)."""

    @property
    def is_measured(self) -> bool:
        return self.status in ("ok", "invalid") and self.samples_per_s is not None

    @property
    def series(self) -> str:
        """The name of this row's line in tables and plots: the target, plus the feed when the
        steps were host-fed (device-fed rows keep the bare target name, as before the feed existed)."""
        return self.target if self.feed in (None, "device") else f"{self.target} {self.feed}-fed"


FIELDS = [field.name for field in dataclasses.fields(ResultRow)]


def check_results_file(path: Path) -> None:
    """Before measuring: the folder is writable and an existing file holds only result rows
    (a corrupt or cut line is named now, not after minutes of measuring)."""
    check_writable_directory(path.parent, f"--out {path}")
    if path.exists():
        read_rows(path)


def append_row(path: Path, row: ResultRow) -> None:
    append_line(path, json.dumps(dataclasses.asdict(row), sort_keys=False))


def read_rows(path: Path) -> list[ResultRow]:
    """All rows of a results file; a line that is not a result row is an error naming the line."""
    if not path.is_file():
        raise UsageError(f"results file {path} does not exist; run `trainspeed bench ... --out {path}` first")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            row = ResultRow(**{k: v for k, v in record.items() if k in FIELDS})
        except (json.JSONDecodeError, TypeError) as error:
            raise UsageError(f"{path}:{number}: not a trainspeed result row ({error})") from None
        if row.status not in STATUSES:
            raise UsageError(f"{path}:{number}: unknown status {row.status!r} (one of {', '.join(STATUSES)})")
        rows.append(row)
    return rows


def write_csv(path: Path, rows: list[ResultRow]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS)
    writer.writeheader()
    for row in rows:
        writer.writerow(dataclasses.asdict(row))
    atomic_write_text(path, buffer.getvalue())
