"""The layout of a workload's batches, and the one check that a batch has it.

By the workload protocol a real dataset's batches have the keys, dtypes and per-sample shapes of
the workload's synthetic batch. Two places rely on it: a remote server, which checks every tensor
header against that layout before it accepts a byte (`serve/batches.py`), and the trainer, which
checks its loader's first batch before any rank starts (`train/launch_plan.py`). Both call
`tensor_problem` here, so a loader whose dtypes differ is refused in one line up front, locally as
remotely, instead of training locally and failing on a server after its model is built.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from trainspeed.data.loader import SAMPLE_ID_KEY
from trainspeed.workloads.base import Workload

SampleLayout = dict[str, tuple[torch.dtype, tuple[int, ...]]]
"""Batch key -> (dtype, shape of one sample)."""
LOADER_KEYS = (SAMPLE_ID_KEY,)
"""Keys a loader adds for itself (sample ids): never part of the workload's batch, never sent."""


def batch_layout(workload: Workload, size: str) -> SampleLayout:
    """The layout of the workload's batches at `size`: its one-sample synthetic batch's, made on the
    meta device (shapes and dtypes, no memory: a server learns that one sample of a client's size is
    10 GB without holding it), or on the host where the workload's batch cannot be made on meta."""
    try:
        with torch.device("meta"):
            sample = workload.synthetic_batch(size, 1, torch.Generator().manual_seed(0))
    except Exception:  # noqa: BLE001 - a batch that reads a value is made where values exist
        sample = workload.synthetic_batch(size, 1, torch.Generator().manual_seed(0))
    return {key: (tensor.dtype, tuple(tensor.shape[1:])) for key, tensor in sample.items()}


def sample_nbytes(layout: SampleLayout) -> int:
    """The bytes of one sample of the layout."""
    return sum(math.prod(shape) * torch.empty((), dtype=dtype, device="meta").element_size()
               for dtype, shape in layout.values())


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe(layout: SampleLayout, key: str, batch_size: int | None = None) -> str:
    dtype, shape = layout[key]
    return f"{dtype_name(dtype)} of shape ({batch_size or 'B'}, {', '.join(map(str, shape))})"


def tensor_problem(layout: SampleLayout, key: str, dtype: torch.dtype, shape: tuple[int, ...],
                   batch_size: int | None = None) -> str | None:
    """Why a batch tensor `key` of `dtype` and `shape` (samples first) does not fit the layout, or
    None; `batch_size`, when known, is shown in the shape expected."""
    if key not in layout:
        return f"batch tensor {key!r} is not part of this workload's batch (it has {', '.join(layout)})"
    expected_dtype, sample_shape = layout[key]
    if dtype != expected_dtype or len(shape) != len(sample_shape) + 1 or tuple(shape[1:]) != sample_shape:
        return (f"batch tensor {key!r}: {dtype_name(dtype)} of shape {list(shape)}, expected "
                f"{describe(layout, key, batch_size)}")
    return None


def batch_problem(layout: SampleLayout, batch: Mapping[str, torch.Tensor]) -> str | None:
    """Why a whole host batch does not have the layout (a key missing or extra, a tensor of another
    dtype or per-sample shape, tensors of different sample counts), or None. A loader's own keys
    (`LOADER_KEYS`) are left out, as a remote target leaves them out of what it sends."""
    keys = [key for key in batch if key not in LOADER_KEYS]
    missing = [key for key in layout if key not in batch]
    if missing:
        return f"it lacks {', '.join(map(repr, missing))} (the workload's batch has {', '.join(layout)})"
    for key in keys:
        tensor = batch[key]
        if not isinstance(tensor, torch.Tensor):
            return f"batch entry {key!r} is a {type(tensor).__name__}, not a tensor"
        problem = tensor_problem(layout, key, tensor.dtype, tuple(tensor.shape))
        if problem is not None:
            return problem
    sizes = {len(batch[key]) for key in keys}
    if len(sizes) > 1:
        return f"its tensors hold different numbers of samples ({', '.join(map(str, sorted(sizes)))})"
    return None
