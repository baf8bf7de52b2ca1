"""What both reference peers share: sizes, command line, synthetic batch, window timing, rows.

The network and its training step are written separately in each peer (`plain_torch.py`,
`jax_optax.py`); only the hyper-parameters that define them live here, so the two peers and
trainspeed can be checked against each other rather than against one shared implementation. The
window loop here is the peers' own on purpose (a harness of their own, timed like trainspeed's);
its result is trainspeed's `Timing`, and trainspeed makes the row from it (`measured_row`), so a
peer's samples/s means what a bench row's means.

Nothing here imports torch, so the JAX peer runs where only JAX is (a TPU host): the Mahjong
workload's identity is hashed from its source files without importing it, and the FLOPs per sample
a peer's net must count are the workload's, pinned here (`WORKLOAD_FLOPS_PER_SAMPLE`) and checked
against the workload itself by the tests and, in a process that has torch, at every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import shlex
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np

# The peers' dependency on trainspeed: its result row, the timing it is made from and the machine
# it records, so that peer rows and trainspeed rows share one JSONL file, one ratio table, one plot.
from trainspeed.bench.config import BATCH_SIZE_LIST
from trainspeed.bench.results import ResultRow, append_row, check_results_file, measured_row
from trainspeed.bench.mfu import Peaks, row_nominal_peak, with_flops
from trainspeed.bench.timing import Timing
from trainspeed.errors import UsageError
from trainspeed.flags import CommaListAction
from trainspeed.machine import (
    Machine,
    cpu_model_name,  # noqa: F401 - re-exported for the peers
)
from trainspeed.workloads.identity import WorkloadIdentity, module_definition_sha256

NUM_TILE_TYPES = 34
"""Tokens: one per tile type."""
NUM_FEATURES = 86
"""Input features per tile type (the engine's 74 planes and 12 facts about tiles)."""
NUM_ACTIONS = 82
TILE_ACTION_STARTS = (0, 42)
"""Action ids that follow the 34 tile types (discard of type t is t, its kan 42 + t): each tile
token scores them itself, beside the pooled head."""
ILLEGAL_LOGIT = -1e9
MLP_RATIO = 4
LAYER_NORM_EPS = 1e-5

LEARNING_RATE = 3e-4
BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.1
ADAM_EPS = 1e-8
INIT_STD = 0.02

DEVICES = ("cpu", "cuda")
"""The devices both peers run on; a peer may take more (`build_parser`'s `devices`: the JAX peer's tpu)."""
PRECISIONS = ("fp32", "bf16")
DEFAULT_OUT = Path("results/reference.jsonl")


@dataclass(frozen=True)
class NetSize:
    width: int
    blocks: int
    heads: int

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


SIZES: dict[str, NetSize] = {
    "tiny": NetSize(width=64, blocks=2, heads=2),
    "small": NetSize(width=256, blocks=4, heads=4),
    "base": NetSize(width=512, blocks=8, heads=8),
    "large": NetSize(width=1024, blocks=16, heads=16),
}

# --- the workload the peers' rows are of --------------------------------------------------------

MAHJONG_WORKLOAD = "mahjong"
MAHJONG_WORKLOAD_MODULE = "trainspeed.workloads.mahjong.workload"
"""Where trainspeed's Mahjong workload (`MahjongWorkload`) is defined: imported only where torch is."""

WORKLOAD_FLOPS_PER_SAMPLE: dict[str, int] = {
    "tiny": 22_635_776,
    "small": 659_158_016,
    "base": 5_197_096_960,
    "large": 41_310_801_920,
}
"""`MahjongWorkload().flops_per_sample(size)` of the 86-plane net, pinned so that a process without
torch can check a peer's count against it; the tests check it against the workload itself."""


def workload_flops_per_sample(size: str) -> float:
    """The Mahjong workload's training FLOPs per sample at `size`: from the workload itself in a
    process that has imported torch (the PyTorch peer), else as pinned (the JAX peer imports no torch)."""
    if "torch" in sys.modules:
        from trainspeed.workloads.mahjong.workload import MahjongWorkload

        return MahjongWorkload().flops_per_sample(size)
    return float(WORKLOAD_FLOPS_PER_SAMPLE[size])


def mahjong_identity() -> WorkloadIdentity:
    """`identify(MahjongWorkload())`, computed without importing the workload's module (which imports
    torch); the workload declares no `version`. The tests check it equals `identify(MahjongWorkload())`."""
    try:
        sha256 = module_definition_sha256(MAHJONG_WORKLOAD_MODULE)
    except ValueError as error:
        raise UsageError(f"cannot identify the Mahjong workload ({error})") from None
    return WorkloadIdentity(name=MAHJONG_WORKLOAD, module=MAHJONG_WORKLOAD_MODULE, version=None, definition_sha256=sha256)


@dataclass(frozen=True)
class WindowPlan:
    warmup_steps: int = 3
    windows: int = 5
    min_window_s: float = 0.5
    max_restarts: int = 5
    """A timed window shorter than min_window_s restarts the windows with more steps, this often at most."""


@dataclass(frozen=True)
class PeerConfig:
    size: str
    batch_sizes: tuple[int, ...]
    device: str
    precision: str
    compile: bool
    threads: int | None
    plan: WindowPlan
    out: Path
    seed: int
    run_id: str | None = None

    @property
    def net_size(self) -> NetSize:
        return SIZES[self.size]


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus an error and exits; the peers want one error line instead."""

    devices: tuple[str, ...] = DEVICES
    precisions: tuple[str, ...] = PRECISIONS

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def build_parser(prog: str, description: str, compile_help: str, devices: tuple[str, ...] = DEVICES,
                 precisions: tuple[str, ...] = PRECISIONS) -> argparse.ArgumentParser:
    parser = _OneLineParser(prog=prog, description=description)
    parser.devices = devices
    parser.precisions = precisions
    parser.add_argument("--size", default="tiny", help=f"one of {', '.join(SIZES)}")
    parser.add_argument("--batch-sizes", action=CommaListAction, items=BATCH_SIZE_LIST, default=BATCH_SIZE_LIST("2^6..2^10"),
                        help="range 2^6..2^10 or list 64,256,1024")
    parser.add_argument("--device", default="cpu", help=" or ".join(devices))
    parser.add_argument("--precision", default="fp32", help=" or ".join(precisions))
    parser.add_argument("--compile", action="store_true", help=compile_help)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (recorded in every row)")
    parser.add_argument("--windows", type=int, default=5, help="timed windows; the median is reported")
    parser.add_argument("--min-window-s", type=float, default=0.5, help="seconds each timed window lasts at least")
    parser.add_argument("--warmup-steps", type=int, default=3, help="steps after the first one, before timing")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSONL file rows are appended to (default {DEFAULT_OUT})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-id", default=None,
                        help="the rows' run id (as trainspeed bench --run-id): rows measured as one comparison share one")
    return parser


def parse_config(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> PeerConfig:
    """Parse and check every flag; a bad one raises UsageError saying how to fix it."""
    args = parser.parse_args(argv)
    if args.size not in SIZES:
        raise UsageError(f"unknown size {args.size!r}; choose one of {', '.join(SIZES)}")
    devices = getattr(parser, "devices", DEVICES)
    if args.device not in devices:
        raise UsageError(f"unknown --device {args.device!r}; choose one of {', '.join(devices)}")
    precisions = getattr(parser, "precisions", PRECISIONS)
    if args.precision not in precisions:
        raise UsageError(f"unknown --precision {args.precision!r}; choose one of {', '.join(precisions)}")
    if args.threads is not None and args.threads <= 0:
        raise UsageError(f"--threads must be positive, got {args.threads}")
    if args.windows < 1 or args.warmup_steps < 0:
        raise UsageError("--windows must be >= 1 and --warmup-steps >= 0")
    if not args.min_window_s > 0:
        raise UsageError(f"--min-window-s must be positive, got {args.min_window_s}")
    return PeerConfig(
        size=args.size,
        batch_sizes=args.batch_sizes,
        device=args.device,
        precision=args.precision,
        compile=args.compile,
        threads=args.threads,
        plan=WindowPlan(warmup_steps=args.warmup_steps, windows=args.windows, min_window_s=args.min_window_s),
        out=args.out,
        seed=args.seed,
        run_id=args.run_id,
    )


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostBatch:
    features: np.ndarray
    """(batch, 86 features, 34 tile types) float32, as trainspeed's Mahjong workload feeds it."""
    mask: np.ndarray
    """(batch, 82) bool: legal actions."""
    action: np.ndarray
    """(batch,) int64: the action taken, always legal."""


def synthetic_batch(batch_size: int, seed: int) -> HostBatch:
    """The same distribution as trainspeed's synthetic Mahjong batch (sparse quarter-valued
    features, ~15% legal actions, a legal action taken), drawn with numpy so both peers share it."""
    rng = np.random.default_rng(seed)
    features = rng.integers(0, 5, (batch_size, NUM_FEATURES, NUM_TILE_TYPES)) / 4
    features = (features * (rng.random(features.shape) < 0.2)).astype(np.float32)
    mask = rng.random((batch_size, NUM_ACTIONS)) < 0.15
    mask[np.arange(batch_size), rng.integers(0, NUM_ACTIONS, batch_size)] = True
    action = (rng.random((batch_size, NUM_ACTIONS)) * mask).argmax(axis=1).astype(np.int64)
    return HostBatch(features=features, mask=mask, action=action)


# --- timing -------------------------------------------------------------------------------------

StepResult = TypeVar("StepResult")


def _steps_to_fill(min_window_s: float, step_s: float) -> int:
    return max(1, math.ceil(min_window_s / max(step_s, 1e-9)))


def time_windows(
    step: Callable[[], StepResult],
    finish: Callable[[StepResult], float],
    plan: WindowPlan,
    compile_count: Callable[[], int] = lambda: 0,
) -> Timing:
    """Time training steps in windows that each last at least `plan.min_window_s`.

    `step()` runs (or queues) one training step; `finish(result)` blocks until that step and all
    before it are done and returns its loss. The first step is timed alone (compilation), then
    warm-up steps estimate the step time. A timed window that still comes out short makes all
    windows start again with more steps, so every kept window lasts long enough and all have the
    same step count. `compile_count()` (compilations so far) is read around the timed windows.
    """
    start = time.perf_counter()
    loss = finish(step())
    first_step_s = time.perf_counter() - start

    estimate_s = first_step_s
    if plan.warmup_steps:
        start = time.perf_counter()
        for _ in range(plan.warmup_steps):
            result = step()
        finish(result)
        estimate_s = (time.perf_counter() - start) / plan.warmup_steps
    steps = _steps_to_fill(plan.min_window_s, estimate_s)

    compiles_before = compile_count()
    for restarts in range(plan.max_restarts + 1):
        last_try = restarts == plan.max_restarts
        window_s: list[float] = []
        cpu_s = 0.0
        for _ in range(plan.windows):
            cpu_start, start = time.process_time(), time.perf_counter()
            for _ in range(steps):
                result = step()
            loss = finish(result)
            window_s.append(time.perf_counter() - start)
            cpu_s += time.process_time() - cpu_start
            if window_s[-1] < plan.min_window_s and not last_try:
                break
        if min(window_s) >= plan.min_window_s or last_try:
            break
        steps = max(steps + 1, math.ceil(steps * 1.1 * plan.min_window_s / max(window_s[-1], 1e-9)))
    return Timing(
        first_step_s=first_step_s,
        window_s=tuple(window_s),
        steps_per_window=steps,
        restarts=restarts,
        cpu_s_per_wall_s=cpu_s / sum(window_s),
        compiles_in_windows=compile_count() - compiles_before,
        final_loss=float(loss),
        steps_capped=min(window_s) < plan.min_window_s,
    )


# --- result rows --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    timing: Timing
    peak_memory_bytes: int | None = None


class Peer(Protocol):
    """One implementation on one device/mode/precision, built once per command line."""

    target: str
    device_name: str
    threads: int | None
    torch_version: str | None
    flops_per_sample: int
    extra: dict[str, Any]
    """Fields beyond trainspeed's schema written into every row (versions, flags, method); `threads`
    (the --threads asked for) is added to them."""

    def measure(self, batch_size: int) -> Measurement: ...

    def is_oom(self, error: BaseException) -> bool: ...


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]


def _without_torch(peer: Peer, machine: Machine) -> Machine:
    """A peer that runs no torch (JAX) records no torch threads or version."""
    if peer.torch_version is None:
        machine = dataclasses.replace(machine, torch_version=None, torch_threads=None, torch_interop_threads=None)
    return machine


def _machine(peer: Peer) -> Machine:
    """This machine, at the start of a measurement."""
    return _without_torch(peer, Machine.at_start())


def check_same_work(peer: Peer, config: PeerConfig) -> None:
    """The rows carry the identity of trainspeed's Mahjong workload (`workload_sha256`), so a peer
    whose net is not that workload's (other planes, another width) is refused before it measures:
    its FLOPs per sample, counted from its own layers, must be the workload's."""
    expected = workload_flops_per_sample(config.size)
    if peer.flops_per_sample != expected:
        raise UsageError(f"{peer.target} counts {peer.flops_per_sample:,} FLOPs per sample at size {config.size}, "
                         f"trainspeed's Mahjong workload {expected:,.0f}: the peer's net is not today's workload "
                         "(update its layers to the workload's definition)")


def run_sweep(peer: Peer, config: PeerConfig) -> list[ResultRow]:
    """Measure every batch size, appending one row each as it is measured (as trainspeed does:
    an interrupted sweep keeps its rows). An out-of-memory batch size is an `oom` row and the
    larger ones are `skipped`; any other failure is an `error` row and the sweep goes on. MFU is
    against the chip's nominal peak where one is known (a peer measures no matmul chain of its own)."""
    run_id = config.run_id or uuid.uuid4().hex[:12]
    identity = mahjong_identity().row_fields()
    rows = []
    out_of_memory_at: int | None = None
    for batch_size in config.batch_sizes:
        machine = _machine(peer)
        base = ResultRow(
            run_id=run_id, timestamp=_now(), workload=MAHJONG_WORKLOAD, size=config.size, target=peer.target,
            batch_size=batch_size, status="skipped", feed="device", bytes_per_step=0,
            flops_per_sample=float(peer.flops_per_sample), device_name=peer.device_name, machine=machine,
            command=shlex.join(["python", Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), **identity,
        )
        if out_of_memory_at is not None:
            row = dataclasses.replace(base, error=f"batch {out_of_memory_at} already ran out of memory")
        else:
            try:
                measurement = peer.measure(batch_size)
            except Exception as error:  # noqa: BLE001 - every failure is a row; OOM is told apart
                row = dataclasses.replace(base, status="oom" if peer.is_oom(error) else "error", error=_first_line(error))
                out_of_memory_at = batch_size if row.status == "oom" else None
            else:
                row = with_flops(measured_row(base, measurement.timing, min_window_s=config.plan.min_window_s,
                                              warmup_steps=config.plan.warmup_steps,
                                              peak_memory_bytes=measurement.peak_memory_bytes),
                                 peer.flops_per_sample, Peaks(nominal=row_nominal_peak(base)))
        row = dataclasses.replace(row, machine=_without_torch(peer, machine.at_end()))
        append_row(config.out, row, {**peer.extra, "threads": peer.threads})
        rows.append(row)
        print(describe(row), flush=True)
    return rows


def describe(row: ResultRow) -> str:
    if row.samples_per_s is None:
        return f"{row.target} batch {row.batch_size}: {row.status} {row.error or ''}".rstrip()
    return (
        f"{row.target} batch {row.batch_size}: {row.samples_per_s:,.0f} samples/s "
        f"(min {row.samples_per_s_min:,.0f}, max {row.samples_per_s_max:,.0f}), step {row.step_time_s * 1e3:.2f} ms, "
        f"first step {row.first_step_s:.2f} s, {row.steps_per_window} steps x {row.windows} windows, "
        f"CPU/wall {row.cpu_s_per_wall_s:.2f}" + (" [invalid: compiled inside a window]" if row.status == "invalid" else "")
    )


def run_main(prog: str, argv: Sequence[str] | None, parser: argparse.ArgumentParser, make_peer: Callable[[PeerConfig], Peer]) -> int:
    """Parse, build the peer, sweep. Bad input is one line `PROG: error: ...` and exit code 2;
    a configuration that failed for another reason makes the exit code 1."""
    try:
        config = parse_config(parser, argv)
        peer = make_peer(config)
        check_same_work(peer, config)
        check_results_file(config.out)  # a file of bench rows only, as `trainspeed bench --out` checks it
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    rows = run_sweep(peer, config)
    print(f"rows appended to {config.out}")
    return 1 if any(row.status == "error" for row in rows) else 0
