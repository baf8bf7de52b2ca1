"""Tensors on the wire: raw bytes with their dtype and shape, in chunks of at most 1 MiB.

A tensor crosses as one or more `TensorChunk` messages: the first carries a header (name, dtype,
shape, byte count), every chunk carries at most `CHUNK_BYTES` of the tensor's bytes in memory order,
and the last has `last` set. The receiver (`TensorAssembler`) checks the header before it accepts
any data: the dtype is on an allow-list, the shape has no negative dimension, its nonzero
dimensions describe no more than the size limit (so an empty tensor cannot name an impossible
shape), and product(shape) x itemsize equals the byte count; the chunks must then add up to exactly
that count.
Only then are the bytes viewed as a tensor (`torch.frombuffer`): nothing is unpickled or evaluated.
"""

from __future__ import annotations

import math
from typing import Iterator

import torch

from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.limits import CHUNK_BYTES, MAX_TENSOR_BYTES

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
"""The dtypes that may cross, by the name on the wire."""
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
MAX_DIMENSIONS = 16
"""More than any workload's tensor has; a header of a million dimensions is refused before torch sees it."""


class WireError(ValueError):
    """What a peer sent breaks the wire format. `too_large`: it exceeds a size limit (the server
    answers RESOURCE_EXHAUSTED), else it is malformed (INVALID_ARGUMENT)."""

    def __init__(self, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def dtype_name(dtype: torch.dtype) -> str:
    try:
        return DTYPE_NAMES[dtype]
    except KeyError:
        raise WireError(f"dtype {dtype} cannot cross the wire; allowed: {', '.join(DTYPES)}") from None


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The tensor's bytes in memory order, on the host (one copy where it is not there already)."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def tensor_chunks(name: str, tensor: torch.Tensor, chunk_bytes: int = CHUNK_BYTES) -> Iterator[pb.TensorChunk]:
    """The chunks of one tensor, the header in the first."""
    header = pb.TensorHeader(name=name, dtype=dtype_name(tensor.dtype), shape=list(tensor.shape),
                             nbytes=tensor.numel() * tensor.element_size())
    data = tensor_bytes(tensor)
    offsets = range(0, len(data), chunk_bytes) if len(data) else [0]
    last_offset = offsets[-1]
    for offset in offsets:
        chunk = pb.TensorChunk(data=data[offset : offset + chunk_bytes].tobytes(), last=offset == last_offset)
        if offset == 0:
            chunk.header.CopyFrom(header)
        yield chunk


def single_chunk(name: str, tensor: torch.Tensor) -> pb.TensorChunk:
    """A small tensor (a loss) as one chunk."""
    (chunk,) = tensor_chunks(name, tensor, chunk_bytes=max(1, tensor.numel() * tensor.element_size()))
    return chunk


def check_header(header: pb.TensorHeader, max_bytes: int = MAX_TENSOR_BYTES) -> torch.dtype:
    """The header's dtype, after checking the dtype, the shape and the byte count agree."""
    dtype = DTYPES.get(header.dtype)
    if dtype is None:
        raise WireError(f"tensor {header.name!r}: dtype {header.dtype!r} is not allowed; send one of {', '.join(DTYPES)}")
    if len(header.shape) > MAX_DIMENSIONS:
        raise WireError(f"tensor {header.name!r}: {len(header.shape)} dimensions; at most {MAX_DIMENSIONS} may cross")
    if any(size < 0 for size in header.shape):
        raise WireError(f"tensor {header.name!r}: negative dimension in shape {list(header.shape)}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    # Counting only the nonzero dimensions: an empty tensor holds no bytes whatever its other
    # dimensions, but torch still multiplies them (its strides overflow for [0, 2**62, 2**62]).
    span = math.prod(size for size in header.shape if size) * itemsize
    if span > max_bytes:
        raise WireError(f"tensor {header.name!r}: shape {list(header.shape)} of {header.dtype} spans {span} bytes "
                        f"(its nonzero dimensions), which exceed the limit of {max_bytes}", too_large=True)
    expected = math.prod(header.shape) * itemsize
    if expected != header.nbytes:
        raise WireError(
            f"tensor {header.name!r}: shape {list(header.shape)} of {header.dtype} is {expected} bytes, "
            f"the header says {header.nbytes}"
        )
    return dtype


class TensorAssembler:
    """Collects the chunks of one tensor at a time; `add` returns (name, tensor) when one is complete."""

    def __init__(self, max_bytes: int = MAX_TENSOR_BYTES, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self._header: pb.TensorHeader | None = None
        self._dtype: torch.dtype | None = None
        self._buffer = bytearray()

    @property
    def header(self) -> pb.TensorHeader | None:
        """The header of the tensor being received (None between tensors)."""
        return self._header

    @property
    def idle(self) -> bool:
        return self._header is None

    def add(self, chunk: pb.TensorChunk) -> tuple[str, torch.Tensor] | None:
        if chunk.HasField("header"):
            if self._header is not None:
                raise WireError(f"tensor {chunk.header.name!r} started before tensor {self._header.name!r} ended")
            self._dtype = check_header(chunk.header, self.max_bytes)
            self._header = chunk.header
            self._buffer = bytearray()
        elif self._header is None:
            raise WireError("a tensor chunk without a header came before any header")
        if len(chunk.data) > self.chunk_bytes:
            raise WireError(f"a chunk of {len(chunk.data)} bytes exceeds the chunk size {self.chunk_bytes}", too_large=True)
        if len(self._buffer) + len(chunk.data) > self._header.nbytes:
            raise WireError(f"tensor {self._header.name!r}: more bytes than the {self._header.nbytes} its header announced")
        self._buffer += chunk.data
        if not chunk.last:
            return None
        header, dtype, buffer = self._header, self._dtype, self._buffer
        self._header, self._dtype, self._buffer = None, None, bytearray()
        if len(buffer) != header.nbytes:
            raise WireError(f"tensor {header.name!r}: {len(buffer)} bytes arrived, its header announced {header.nbytes}")
        return header.name, from_bytes(buffer, dtype, tuple(header.shape))


def from_bytes(buffer: bytearray, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """View checked bytes as a tensor (sharing the buffer, which nothing else holds)."""
    if len(buffer) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype).reshape(shape)


def decode_single(chunk: pb.TensorChunk, max_bytes: int = MAX_TENSOR_BYTES) -> torch.Tensor:
    """A tensor sent as one chunk (a loss)."""
    assembler = TensorAssembler(max_bytes)
    if not chunk.last:
        raise WireError("a single-chunk tensor without `last`")
    result = assembler.add(chunk)
    assert result is not None
    return result[1]
