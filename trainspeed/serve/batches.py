"""What a batch of a session's workload must look like, checked tensor by tensor as it arrives.

The server knows the layout from the workload itself: the keys, dtypes and per-sample shapes of a
one-sample synthetic batch (real data has the same layout, by the workload protocol, and the
trainer checks its loader's first batch by the same function, `workloads.batches`). A header
naming another key, dtype or shape is refused before its bytes are accepted; the first batch fixes
the session's batch size (unless `open` named it), and every tensor of every batch must have it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from trainspeed.serve.memory import SessionMemory
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.tensors import DTYPES, TensorAssembler, WireError, check_header
from trainspeed.workloads.base import Workload
from trainspeed.workloads.batches import SampleLayout, batch_layout, sample_nbytes, tensor_problem

MAX_RESIDENT_BATCHES = 64
"""Batches a session may hold at once (uploaded, not yet released): enough for any number of steps
in flight; their bytes also count against the server's memory budget (`memory.py`)."""


@dataclass
class BatchLayout:
    fields: SampleLayout
    """Key -> (dtype, shape of one sample): the workload's `batch_layout`."""
    batch_size: int | None = None

    @classmethod
    def of(cls, workload: Workload, size: str, batch_size: int | None) -> "BatchLayout":
        return cls(batch_layout(workload, size), batch_size)

    def sample_nbytes(self) -> int:
        return sample_nbytes(self.fields)

    def check_header(self, header: pb.TensorHeader) -> None:
        """The header against the workload's layout, by the check the trainer runs on its loader's
        first batch (`workloads.batches.tensor_problem`); then the session's batch size."""
        shape = tuple(header.shape)
        problem = tensor_problem(self.fields, header.name, DTYPES[header.dtype], shape, self.batch_size)
        if problem is not None:
            raise WireError(problem)
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
