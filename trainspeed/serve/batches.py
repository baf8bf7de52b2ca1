"""What a batch of a session's workload must look like, checked tensor by tensor as it arrives.

The server knows the layout from the workload itself: the keys, dtypes and per-sample shapes of a
one-sample synthetic batch (real data has the same layout, by the workload protocol). A header
naming another key, dtype or shape is refused before its bytes are accepted; the first batch fixes
the session's batch size (unless `open` named it), and every tensor of every batch must have it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trainspeed.serve.memory import SessionMemory
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.tensors import DTYPE_NAMES, TensorAssembler, WireError, check_header
from trainspeed.workloads.base import Workload

MAX_RESIDENT_BATCHES = 64
"""Batches a session may hold at once (uploaded, not yet released): enough for any number of steps
in flight; their bytes also count against the server's memory budget (`memory.py`)."""


@dataclass
class BatchLayout:
    fields: dict[str, tuple[str, tuple[int, ...]]]
    """Key -> (dtype name, shape of one sample)."""
    batch_size: int | None = None

    @classmethod
    def of(cls, workload: Workload, size: str, batch_size: int | None) -> "BatchLayout":
        sample = workload.synthetic_batch(size, 1, torch.Generator().manual_seed(0))
        return cls({key: (DTYPE_NAMES.get(t.dtype, str(t.dtype)), tuple(t.shape[1:])) for key, t in sample.items()},
                   batch_size)

    def describe(self, key: str) -> str:
        dtype, shape = self.fields[key]
        return f"{dtype} of shape ({self.batch_size or 'B'}, {', '.join(map(str, shape))})"

    def check_header(self, header: pb.TensorHeader) -> None:
        if header.name not in self.fields:
            raise WireError(f"batch tensor {header.name!r} is not part of this workload's batch "
                            f"(it has {', '.join(self.fields)})")
        dtype, sample_shape = self.fields[header.name]
        shape = tuple(header.shape)
        if header.dtype != dtype or len(shape) != len(sample_shape) + 1 or shape[1:] != sample_shape:
            raise WireError(f"batch tensor {header.name!r}: {header.dtype} of shape {list(shape)}, "
                            f"expected {self.describe(header.name)}")
        if self.batch_size is None:
            self.batch_size = shape[0]
        if shape[0] != self.batch_size or shape[0] == 0:
            raise WireError(f"batch tensor {header.name!r} holds {shape[0]} samples; the client's session has batch size "
                            f"{self.batch_size}")


@dataclass
class BatchAssembly:
    """The batch being received: its tensors so far, each checked against the layout and taken
    from the session's memory before its bytes are accepted."""

    batch_id: int
    layout: BatchLayout
    memory: SessionMemory
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    assembler: TensorAssembler = field(default_factory=TensorAssembler)
    nbytes: int = 0
    """Bytes taken from the session's memory for this batch so far."""

    def add(self, chunk: pb.TensorChunk) -> None:
        if chunk.HasField("header"):
            if chunk.header.name in self.tensors:
                raise WireError(f"batch {self.batch_id}: tensor {chunk.header.name!r} sent twice")
            check_header(chunk.header, self.assembler.max_bytes)  # the wire's own checks first
            self.layout.check_header(chunk.header)
            self.memory.take(chunk.header.nbytes, f"batch {self.batch_id} tensor {chunk.header.name!r}")
            self.nbytes += chunk.header.nbytes
        received = self.assembler.add(chunk)
        if received is not None:
            name, tensor = received
            self.tensors[name] = tensor

    def finish(self) -> dict[str, torch.Tensor]:
        missing = [key for key in self.layout.fields if key not in self.tensors]
        if missing or not self.assembler.idle:
            raise WireError(f"batch {self.batch_id} ended without {', '.join(missing) or 'the rest of its last tensor'}")
        return self.tensors
