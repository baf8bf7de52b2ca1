"""The wire format: tensors as checked raw bytes in 1 MiB chunks, states as tensors plus tagged JSON,
and nothing in the packages that read what a peer sends that could unpickle or evaluate it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.address import Address
from trainspeed.wire.limits import CHUNK_BYTES
from trainspeed.wire.state import decode_state, encode_state
from trainspeed.wire.tensors import DTYPES, TensorAssembler, WireError, decode_single, single_chunk, tensor_chunks
from trainspeed.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]


def roundtrip(tensor: torch.Tensor, name: str = "x") -> torch.Tensor:
    assembler = TensorAssembler()
    results = [assembler.add(chunk) for chunk in tensor_chunks(name, tensor)]
    assert all(result is None for result in results[:-1])
    assert results[-1][0] == name
    return results[-1][1]


@pytest.mark.parametrize("dtype", list(DTYPES.values()))
def test_every_allowed_dtype_crosses_bit_for_bit(dtype):
    tensor = (torch.randn(7, 3, 5) * 100).to(dtype)
    assert torch.equal(roundtrip(tensor), tensor)
    assert torch.equal(decode_single(single_chunk("loss", tensor[0, 0, 0])), tensor[0, 0, 0])


def test_large_tensors_cross_in_chunks_of_one_mib():
    tensor = torch.arange(3 * CHUNK_BYTES // 4 + 5, dtype=torch.float32)
    chunks = list(tensor_chunks("big", tensor))
    assert [len(c.data) for c in chunks] == [CHUNK_BYTES] * 3 + [20]
    assert [c.HasField("header") for c in chunks] == [True, False, False, False]
    assert [c.last for c in chunks] == [False, False, False, True]
    assert torch.equal(roundtrip(tensor), tensor)


def test_empty_and_non_contiguous_tensors():
    assert roundtrip(torch.empty(0, 4)).shape == (0, 4)
    tensor = torch.randn(4, 6).t()
    assert torch.equal(roundtrip(tensor), tensor)


def header_chunk(dtype: str, shape: list[int], nbytes: int, data: bytes = b"", last: bool = True) -> pb.TensorChunk:
    return pb.TensorChunk(header=pb.TensorHeader(name="x", dtype=dtype, shape=shape, nbytes=nbytes), data=data, last=last)


@pytest.mark.parametrize(
    "chunk, fragment, too_large",
    [
        (header_chunk("float64", [2], 16, b"\0" * 16), "dtype 'float64' is not allowed", False),
        (header_chunk("object", [1], 8, b"\0" * 8), "not allowed", False),
        (header_chunk("float32", [2, 3], 20, b"\0" * 20), "is 24 bytes, the header says 20", False),
        (header_chunk("float32", [-1, 4], 16, b"\0" * 16), "negative dimension", False),
        (header_chunk("float32", [2], 8, b"\0" * 4), "4 bytes arrived", False),
        (header_chunk("float32", [2], 8, b"\0" * 12), "more bytes than", False),
        (header_chunk("uint8", [2**40], 2**40), "exceed the limit", True),
        (header_chunk("float32", [0, 2**62, 2**62], 0), "spans 85070591730234615865843651857942052864 bytes (its "
                                                        "nonzero dimensions), which exceed the limit", True),
        (header_chunk("float32", [1] * 17, 4, b"\0" * 4), "17 dimensions; at most 16 may cross", False),
    ],
)
def test_bad_headers_and_byte_counts_are_refused_before_use(chunk, fragment, too_large):
    with pytest.raises(WireError, match=re.escape(fragment)) as caught:
        TensorAssembler().add(chunk)
    assert caught.value.too_large == too_large


def test_chunks_out_of_order_are_refused():
    with pytest.raises(WireError, match="without a header"):
        TensorAssembler().add(pb.TensorChunk(data=b"\0" * 4, last=True))
    assembler = TensorAssembler()
    assembler.add(header_chunk("float32", [4], 16, b"\0" * 8, last=False))
    with pytest.raises(WireError, match="started before"):
        assembler.add(header_chunk("float32", [1], 4, b"\0" * 4))


def test_states_cross_as_tensors_and_tagged_json():
    state = {
        "networks": {"policy": {"w": torch.randn(3, 2), "b": torch.zeros(2, dtype=torch.bfloat16)}},
        "optimizers": {"policy": {"state": {0: {"step": torch.tensor(3.0)}}, "param_groups": [
            {"lr": 3e-4, "betas": (0.9, 0.95), "foreach": None, "params": [0, 1], "nan": math.inf}]}},
    }
    skeleton, tensors = encode_state(state)
    assert len(tensors) == 3 and "tensor" in skeleton
    back = decode_state(skeleton, tensors)
    assert back["optimizers"]["policy"]["param_groups"][0]["betas"] == (0.9, 0.95)
    assert list(back["optimizers"]["policy"]["state"]) == [0]  # int keys stay ints
    assert torch.equal(back["networks"]["policy"]["w"], state["networks"]["policy"]["w"])


@pytest.mark.parametrize(
    "skeleton, fragment",
    [
        ('{"tensor": 5}', "out of range"),
        ('[{"tensor": 0}, {"tensor": 0}]', "twice"),
        ('{"__reduce__": "os.system"}', "unexpected node"),
        ('{"dict": [[[1], 2]]}', "dict key"),
        ("not json", "not JSON"),
        ("[]", "uses 0 of the 1 tensors"),
    ],
)
def test_bad_state_skeletons_are_refused(skeleton, fragment):
    with pytest.raises(WireError, match=fragment):
        decode_state(skeleton, [torch.zeros(1)])


def test_values_without_a_wire_form_are_refused():
    with pytest.raises(WireError, match="type object"):
        encode_state({"x": object()})


def test_addresses():
    assert Address.parse("127.0.0.1:50051").is_loopback
    assert Address.parse("[::1]:80").is_loopback and str(Address.parse("[::1]:80")) == "[::1]:80"
    assert Address.parse("localhost:1").is_loopback
    assert not Address.parse("10.0.0.1:1").is_loopback and not Address.parse("example.org:1").is_loopback
    for bad in ("nohost", "1.2.3.4:", ":80", "::1:80", "h:99999", "[::1]80"):
        with pytest.raises(UsageError, match="HOST:PORT"):
            Address.parse(bad)


FORBIDDEN = re.compile(r"\bpickle\b|\btorch\.load\b|\beval\(|\bexec\(|\bmarshal\b|weights_only")


def test_nothing_that_reads_a_peers_bytes_can_unpickle_or_evaluate_them():
    files = sorted((REPO_ROOT / "trainspeed" / "serve").glob("*.py")) + sorted((REPO_ROOT / "trainspeed" / "wire").glob("*.py"))
    assert len(files) >= 10
    offenders = [f"{path.name}:{n}: {line.strip()}" for path in files
                 for n, line in enumerate(path.read_text().splitlines(), 1) if FORBIDDEN.search(line)]
    assert offenders == []
