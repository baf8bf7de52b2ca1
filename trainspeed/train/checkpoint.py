"""Checkpoints that a crash cannot corrupt and that a shared run directory cannot turn into code.

A checkpoint is one file holding everything to continue bit-for-bit: networks, optimizers, LR
schedulers, the step, and per rank the loader position, the RNG states (python, numpy, torch,
and the target's device generator) and the networks' buffers (statistics a rank keeps of its own
batches). Rank 0 gathers the per-rank parts and writes the file through
`atomic_path`, its sha256 beside it (`step-*.pt.sha256`, the format `sha256sum -c` reads) before
the file takes its name, then points `checkpoints/latest` at it (each atomically), so a kill -9 at
any moment leaves either the previous checkpoint or the new one, never one without its checksum.
The newest two up to the one just written are kept (or as many as `--keep-checkpoints` says; 0
keeps all, to evaluate a policy as it learnt); a checkpoint of a later step is never deleted: a run
resumed from an earlier step first moves the later ones into `checkpoints/superseded/N/` (`trainspeed.train.resume`).

A run directory may come from someone else, so loading is for data only: the checksum must match,
and the file is read with torch's `weights_only` unpickler, which builds tensors, numbers, strings,
None, lists, tuples and dicts and refuses everything else before it runs. Writing holds the
payload to the same rule (`plain_data_problem`), so a workload whose state holds another type is
told at its first checkpoint, not at its first resume. The RNG states are plain data for that
reason: numpy's generator state is stored as a list of ints, not as an ndarray.
"""

from __future__ import annotations

import hashlib
import pickle
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np
import torch

from trainspeed.atomic import atomic_path, atomic_write_text
from trainspeed.checksum_file import ChecksumProblem, checksum_path, recorded_checksum, write_checksum
from trainspeed.errors import UsageError
from trainspeed.targets.base import Target
from trainspeed.user_files import FileRefused, open_regular, read_regular

CHECKPOINT_DIR = "checkpoints"
LATEST_POINTER = "latest"
KEEP_CHECKPOINTS = 2
SUPERSEDED_DIR = "superseded"
CHECKPOINT_NAME = re.compile(r"step-(\d{9})\.pt")
POINTER_MAX_BYTES = 256
PLAIN_SCALARS = (type(None), bool, int, float, str)


def capture_rng_states(target: Target) -> dict[str, Any]:
    numpy_state = np.random.get_state(legacy=False)
    return {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": numpy_state["state"]["key"].tolist(),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "device": target.device_rng_state(),
    }


def restore_rng_states(states: dict[str, Any], target: Target) -> None:
    random.setstate(states["python"])
    numpy_state = states["numpy"]
    np.random.set_state({
        "bit_generator": numpy_state["bit_generator"],
        "state": {"key": np.asarray(numpy_state["key"], dtype=np.uint32), "pos": numpy_state["pos"]},
        "has_gauss": numpy_state["has_gauss"],
        "gauss": numpy_state["gauss"],
    })
    torch.set_rng_state(states["torch"])
    if states.get("device") is not None:
        target.set_device_rng_state(states["device"])


def to_host(value: Any) -> Any:
    """Copy every tensor in a nested state to the CPU (XLA and CUDA tensors do not pickle portably)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, dict):
        return {key: to_host(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(item) for item in value)
    return value


def plain_data_problem(value: Any, where: str = "checkpoint") -> str | None:
    """Where `value` holds something `weights_only` loading would refuse, or None: tensors, None,
    bool, int, float, str, and lists, tuples and dicts (str or int keys) of them."""
    if isinstance(value, torch.Tensor) or type(value) in PLAIN_SCALARS:
        return None
    if type(value) in (list, tuple):
        items = enumerate(value)
    elif type(value) is dict:
        bad_keys = [key for key in value if type(key) not in (str, int)]
        if bad_keys:
            return f"{where} has a key of type {type(bad_keys[0]).__name__}"
        items = value.items()
    else:
        return f"{where} is a {type(value).__module__}.{type(value).__qualname__}"
    for key, item in items:
        problem = plain_data_problem(item, f"{where}[{key!r}]")
        if problem is not None:
            return problem
    return None


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def checkpoint_name(step: int) -> str:
    return f"step-{step:09d}.pt"


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def step_files(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint file of the run, newest first."""
    directory = checkpoint_dir(run_dir)
    if not directory.is_dir():
        return []
    found = [(int(match.group(1)), path) for path in directory.iterdir()
             if (match := CHECKPOINT_NAME.fullmatch(path.name))]
    return sorted(found, reverse=True)


def save_checkpoint(run_dir: Path, step: int, payload: dict[str, Any], keep: int = KEEP_CHECKPOINTS,
                    make_latest: bool = True) -> Path:
    """Write `payload` as the checkpoint of `step`, its checksum, and (`make_latest`) make it the
    latest and prune the ones before it down to `keep` in all (0: keep every one)."""
    host_payload = to_host(payload)
    problem = plain_data_problem(host_payload)
    if problem is not None:
        raise TypeError(f"the checkpoint of step {step} cannot be written: {problem}; a checkpoint holds "
                        "only tensors, numbers, strings, None, and lists, tuples and dicts of them")
    directory = checkpoint_dir(run_dir)
    path = directory / checkpoint_name(step)
    with atomic_path(path) as tmp:
        torch.save(host_payload, tmp)
        write_checksum(path, sha256_of(tmp))  # before the checkpoint takes its name: a kill leaves none without one
    if make_latest:
        make_checkpoint_latest(run_dir, step, keep)
    return path


def make_checkpoint_latest(run_dir: Path, step: int, keep: int = KEEP_CHECKPOINTS) -> None:
    """Point `checkpoints/latest` at the checkpoint of `step` and prune the ones before it. The
    processes of one program over several hosts each write their own copy first and point at it
    only once every copy is written, so a kill between leaves every process's `latest` at the
    checkpoint before."""
    atomic_write_text(checkpoint_dir(run_dir) / LATEST_POINTER, checkpoint_name(step) + "\n")
    if keep:
        _prune_before(run_dir, step, keep)


def _prune_before(run_dir: Path, step: int, keep: int) -> None:
    """Keep `keep` - 1 checkpoints before `step`; never touch a later one."""
    older = [path for found_step, path in step_files(run_dir) if found_step < step]
    for old in older[keep - 1:]:
        old.unlink(missing_ok=True)
        checksum_path(old).unlink(missing_ok=True)


def read_latest(run_dir: Path) -> tuple[Path | None, str | None]:
    """The checkpoint `checkpoints/latest` names, or None and why not (None when there is no pointer
    and no checkpoint either: a run that never checkpointed). Only a bare checkpoint name in a
    regular file counts: a pointer cannot lead outside its run, and a symlink or a FIFO in its place
    is neither followed nor read (its target's bytes are never quoted)."""
    pointer = checkpoint_dir(run_dir) / LATEST_POINTER
    if pointer.is_symlink():
        return None, "checkpoints/latest is a symbolic link, not the file the trainer writes (it is not followed)"
    if not pointer.exists():
        return None, "checkpoints/latest is missing" if step_files(run_dir) else None
    try:
        raw = read_regular(pointer, "checkpoints/latest", POINTER_MAX_BYTES)
    except FileRefused as error:
        return None, f"checkpoints/latest {error.reason}"
    try:
        name = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        name = None
    if name is None or len(raw) > POINTER_MAX_BYTES or not CHECKPOINT_NAME.fullmatch(name):
        shown = repr(name[:60]) if name is not None else "binary data"
        return None, f"checkpoints/latest holds {shown}, not the name of a checkpoint of this run"
    path = pointer.parent / name
    if not path.exists() and not path.is_symlink():
        return None, f"checkpoints/latest names {name}, which does not exist"
    return path, None


class CheckpointRefused(UsageError):
    """A checkpoint file that is not loaded, and why (the message is the full path, then the reason)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The payload, on the host, after its checksum matched; CheckpointRefused otherwise.
    Only a regular file is read (a FIFO or a device would never end), and the bytes loaded are the
    bytes hashed: one open file, rewound. Nothing in the file runs: it is read with torch's
    weights_only unpickler."""
    expected = _recorded_checksum(path)
    try:
        handle = open_regular(path)
    except FileRefused as error:
        raise CheckpointRefused(path, error.reason) from None
    with handle:
        try:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError as error:
            raise CheckpointRefused(path, f"cannot be read ({error.strerror})") from None
        if digest != expected:
            raise CheckpointRefused(path, "fails its sha256 check (it changed after it was written)")
        handle.seek(0)
        payload = _unpickle_data(path, handle)
    if not isinstance(payload, dict):
        raise CheckpointRefused(path, f"is not a trainspeed checkpoint (it holds a {type(payload).__name__})")
    return payload


def _unpickle_data(path: Path, handle: BinaryIO) -> Any:
    """torch's weights_only load of an open checkpoint; CheckpointRefused for anything it refuses."""
    try:
        return torch.load(handle, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointRefused(path, "holds objects other than tensors and plain data, so it was not "
                                "loaded (a checkpoint is data, never code)") from None
    except Exception as error:  # a damaged zip, a truncated tensor: torch raises many kinds
        raise CheckpointRefused(path, f"is not a readable checkpoint ({type(error).__name__})") from None


def _recorded_checksum(path: Path) -> str:
    try:
        return recorded_checksum(path)
    except ChecksumProblem as problem:
        raise CheckpointRefused(path, problem.reason) from None


@dataclass(frozen=True)
class FoundCheckpoint:
    path: Path
    payload: dict[str, Any]
    skipped: tuple[str, ...]
    """Why the pointer or newer checkpoints were passed over, one phrase each; empty when this is
    the checkpoint `latest` names."""


PayloadCheck = Callable[[Path, dict[str, Any]], Any]
"""Checks a loaded payload against what it must hold; raises a UsageError (not CheckpointRefused)
for one that does not fit, which stops the search: such a file is refused, never passed over."""


def find_checkpoint(run_dir: Path, check: PayloadCheck | None = None) -> FoundCheckpoint | None:
    """The checkpoint to continue from: the one `latest` names when it is valid, otherwise the newest
    valid one. None when the run has no checkpoint at all; UsageError (listing each problem) when it
    has some but none is valid, so nothing restarts a run from step 0 over its checkpoints. `check`
    runs on the payload that loads first."""
    latest, problem = read_latest(run_dir)
    problems = [problem] if problem else []
    candidates = ([latest] if latest else []) + [path for _, path in step_files(run_dir) if path != latest]
    for path in candidates:
        try:
            payload = load_checkpoint(path)
        except CheckpointRefused as error:
            problems.append(f"{path.name} {error.reason}")
            continue
        if check is not None:
            check(path, payload)
        return FoundCheckpoint(path, payload, tuple(problems))
    if problems:
        raise UsageError("; ".join(problems) + f"; no valid checkpoint is left in {checkpoint_dir(run_dir)}")
    return None
