"""A manifest's values in their ranges and consistent with each other, checked once it is read.

Typing (`trainspeed.typed_json`) makes every field of its type; these checks make every value one
the loader, the data reader, the LR rule and the rows can use: a shape of no negative dimension, a
dtype the programs and npz files can hold, a seed JAX's PRNG takes, a reference batch to scale the
LR from, a split of 0..1000 per mille, at least one optimizer group, FLOPs that are a number, and a
size for every file that its contents allow. A folder that fails one is refused in one line naming
the field, before anything is written or measured; whether the programs take what the manifest
says is checked where they are read (`trainspeed.exported.signatures`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np

from trainspeed.errors import UsageError
from trainspeed.exported.manifest import (
    BATCH_FILE,
    EVAL_FORMULAS,
    INITIAL_STATES,
    LEAF_SOURCES,
    STATE_FILE,
    Column,
    Leaf,
    Manifest,
    Program,
)
from trainspeed.exported.npz_arrays import NPY_HEADER_MAX
from trainspeed.flags import INT_FLAG_MAX, MAX_BATCH_SIZE

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64", "bfloat16")
"""The dtypes of a leaf or a column: what the traced step takes and an npz file holds (bfloat16 as
its 16 bits, `trainspeed.exported.stored_arrays`)."""
MAX_PROGRAM_BYTES = (1 << 31) - 1
"""A jax.export artifact is one flatbuffer, which cannot exceed 2 GiB."""
ZIP_RECORDS_MAX = 1024
"""The zip records of one npz member (local and central headers, zip64 extras, its name)."""
MAX_DEVICES = 1 << 16
"""More devices than any TPU slice has: a mesh's size is checked before a runtime is asked for it."""
SHA256 = re.compile(r"[0-9a-f]{64}")


def itemsize(dtype: str) -> int:
    """Bytes per element of one of `DTYPES`."""
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def array_bytes(shape: list[int], dtype: str) -> int:
    return math.prod(shape) * itemsize(dtype)


def npz_bytes_bound(data_bytes: int, members: int) -> int:
    """The most bytes an npz of `members` arrays that hold `data_bytes` can take, stored or
    deflated (zlib's deflateBound grows data by well under 1/1000)."""
    return data_bytes + data_bytes // 1000 + (members + 1) * (NPY_HEADER_MAX + ZIP_RECORDS_MAX)


def check_manifest(manifest: Manifest, what: str) -> None:
    """UsageError naming the first field out of its range (`what`: the manifest, as told)."""
    for problem in _problems(manifest):
        raise UsageError(f"{what}: {problem}; export the step again")


def _problems(manifest: Manifest) -> Iterator[str]:
    yield from _identity(manifest)
    yield from _columns(manifest.columns)
    yield from _leaves(manifest)
    yield from _programs(manifest)
    yield from _training(manifest)
    yield from _evaluation(manifest)
    yield from _files(manifest)


def _identity(manifest: Manifest) -> Iterator[str]:
    from trainspeed.jaxrt import PLATFORMS

    if not manifest.platforms or len(set(manifest.platforms)) != len(manifest.platforms) \
            or not set(manifest.platforms) <= set(PLATFORMS):
        yield f"platforms {manifest.platforms!r:.80} is not a list of distinct platforms of {', '.join(PLATFORMS)}"
    if not (math.isfinite(manifest.flops_per_sample) and manifest.flops_per_sample > 0):
        yield f"flops_per_sample {manifest.flops_per_sample!r} is not a number above 0"
    if not 0 <= manifest.seed <= INT_FLAG_MAX:
        yield f"seed {manifest.seed} is not one of 0..{INT_FLAG_MAX} (export --seed takes those)"
    if manifest.initial_state not in INITIAL_STATES:
        yield f"initial_state {manifest.initial_state!r:.40} is none of {', '.join(INITIAL_STATES)}"


def _shape_problem(shape: list[int]) -> str | None:
    if any(size < 0 for size in shape):
        return f"shape {shape} has a negative dimension"
    if math.prod(shape) > MAX_BATCH_SIZE:
        return f"shape {shape} holds more than 2^40 elements"
    return None


def _columns(columns: list[Column]) -> Iterator[str]:
    if not columns or len({column.name for column in columns}) != len(columns):
        yield "columns are not one or more columns of distinct names"
    for column in columns:
        if column.dtype not in DTYPES:
            yield f"column {column.name!r:.40} has dtype {column.dtype!r:.40}, none of {', '.join(DTYPES)}"
        problem = _shape_problem(column.sample_shape)
        if problem is not None:
            yield f"column {column.name!r:.40}'s sample {problem}"


def _leaf_problem(leaf: Leaf, initial_state: str) -> str | None:
    name = f"state leaf {leaf.name!r:.60}"
    if leaf.dtype not in DTYPES:
        return f"{name} has dtype {leaf.dtype!r:.40}, none of {', '.join(DTYPES)}"
    problem = _shape_problem(leaf.shape)
    if problem is not None:
        return f"{name}'s {problem}"
    if leaf.source not in LEAF_SOURCES or (leaf.source in ("constant", "normal") and leaf.mean is None) \
            or (leaf.source == "normal" and leaf.std is None):
        return f"{name} has no initial value it can be made from (source {leaf.source!r:.40})"
    if any(value is not None and not math.isfinite(value) for value in (leaf.mean, leaf.std)) \
            or (leaf.std is not None and leaf.std < 0):
        return f"{name} is drawn with mean {leaf.mean} and standard deviation {leaf.std}, not finite numbers (>= 0)"
    if initial_state == "file" and leaf.source in ("constant", "normal"):
        return f"{name} is made on the device ({leaf.source}), and the export says its state travels in {STATE_FILE}"
    return None


def _leaves(manifest: Manifest) -> Iterator[str]:
    if not manifest.state or len({leaf.name for leaf in manifest.state}) != len(manifest.state):
        yield "state is not one or more leaves of distinct names"
    for leaf in manifest.state:
        problem = _leaf_problem(leaf, manifest.initial_state)
        if problem is not None:
            yield problem


def _program_problem(program: Program, step_phases: list[str]) -> str | None:
    size = program.batch_size
    if not 1 <= size <= MAX_BATCH_SIZE:
        return f"batch size {size} is not one of 1..2^40"
    named = {phase.phases for phase in program.phase_programs}
    if step_phases and not set(step_phases) <= named:
        return f"batch size {size} has no program for some of the step phases {sorted(set(step_phases) - named)}"
    if program.micro_batches < 1 or size % program.micro_batches:
        return f"batch size {size} is not cut into {program.micro_batches} equal micro-batches"
    sliced = program.sliced
    if sliced is not None and (sliced.parts < 2 or size % sliced.parts or not sliced.networks
                               or len(set(sliced.networks)) != len(sliced.networks)):
        return (f"batch size {size}'s step in slices ({sliced.parts} slices of networks {sliced.networks}) does not "
                "cut the batch into 2 or more equal slices of named networks")
    if (program.eval_file is None) != (program.eval_sha256 is None):
        return f"batch size {size} names an eval program without its sha256, or a sha256 without its file"
    return None


def _programs(manifest: Manifest) -> Iterator[str]:
    sizes = manifest.batch_sizes
    if not sizes or len(set(sizes)) != len(sizes):
        yield "programs are not one or more programs of distinct batch sizes"
    for program in manifest.programs:
        problem = _program_problem(program, manifest.step_phases)
        if problem is not None:
            yield problem
    if sizes and not 1 <= manifest.batch_rows <= max(sizes):
        yield f"batch_rows {manifest.batch_rows} is not one of 1..{max(sizes)} (the largest batch size)"
    if manifest.devices is not None:
        if not 1 <= manifest.devices <= MAX_DEVICES:
            yield f"devices {manifest.devices} is not one of 1..{MAX_DEVICES} (or null: one device, no mesh)"
        elif any(size % manifest.devices for size in sizes):
            yield f"devices {manifest.devices} does not divide every batch size ({','.join(map(str, sizes))})"


def _training(manifest: Manifest) -> Iterator[str]:
    if not manifest.optimizer_groups:
        yield "optimizer_groups is empty; the step takes one learning rate per group"
    for group in manifest.optimizer_groups:
        if not (math.isfinite(group.lr) and group.lr >= 0):
            yield f"optimizer {group.optimizer!r:.40}'s learning rate {group.lr} is not a number >= 0"
    reference = manifest.lr_reference_batch
    if reference is not None and not 1 <= reference <= MAX_BATCH_SIZE:
        yield f"lr_reference_batch {reference} is not one of 1..2^40 (or null: the LR is used as set)"
    split = manifest.data_split
    if split is not None and not 0 <= split.val_per_mille <= 1000:
        yield f"data_split's val_per_mille {split.val_per_mille} is not one of 0..1000"
    if split is not None and split.column == "":
        yield "data_split's column is empty (null: split by each sample's position)"


def _evaluation(manifest: Manifest) -> Iterator[str]:
    if len(set(manifest.eval_metrics)) != len(manifest.eval_metrics):
        yield "eval_metrics names a sum twice"
    for formula in manifest.eval_summary:
        sums = [formula.of] + ([formula.per] if formula.formula != "value" else [])
        if formula.formula not in EVAL_FORMULAS or any(name not in manifest.eval_metrics for name in sums):
            yield f"validation metric {formula.metric!r:.40} is not made from the eval program's sums"


def _file_bound(manifest: Manifest, name: str) -> int:
    """The most bytes the file `name` can take, from what the manifest says it holds."""
    if name == STATE_FILE:
        stored = [leaf for leaf in manifest.state if leaf.source == "file"]
        return npz_bytes_bound(sum(array_bytes(leaf.shape, leaf.dtype) for leaf in stored), len(stored))
    if name == BATCH_FILE:
        rows = sum(array_bytes([manifest.batch_rows, *column.sample_shape], column.dtype)
                   for column in manifest.columns)
        return npz_bytes_bound(rows, len(manifest.columns))
    return MAX_PROGRAM_BYTES


def _files(manifest: Manifest) -> Iterator[str]:
    named = manifest.named_files()
    for name, sha256 in named.items():
        if not SHA256.fullmatch(sha256):
            yield f"the sha256 of {name!r:.60} is not 64 hexadecimal digits"
    if set(named) != set(manifest.file_bytes):
        unsized = sorted(set(named) - set(manifest.file_bytes)) or sorted(set(manifest.file_bytes) - set(named))
        yield f"file_bytes does not name every file of the folder, and only those ({', '.join(unsized)[:120]})"
    for name, size in manifest.file_bytes.items():
        if name in named and not 0 < size <= _file_bound(manifest, name):
            yield f"file_bytes says {name} holds {size:,} bytes, and what the manifest says it holds takes at most " \
                  f"{_file_bound(manifest, name):,}"
