"""What the remote tests share besides fixtures: the token, Mahjong batches and their losses locally
and remotely, and raw sessions that send exactly the messages a test gives (servers in this process
are tests/conftest.py's `serve` fixture; `trainspeed serve` in a process of its own is
child_commands.ServeProcess)."""

from __future__ import annotations

import gc
import time

import grpc
import pytest
import torch

from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.limits import CLIENT_OPTIONS
from trainspeed.wire.tensors import tensor_chunks
from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import identify

TOKEN = "0123456789abcdef0123456789abcdef"
WORKLOAD = get_workload("mahjong")


def batches(count: int, batch_size: int = 16, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [WORKLOAD.synthetic_batch("tiny", batch_size, generator) for _ in range(count)]


def local_losses(host_batches) -> list[float]:
    target = get_target("cpu:eager:fp32")
    trainable = target.build(WORKLOAD, "tiny", 0)
    return [float(target.run_step(trainable, target.move_batch(b))) for b in host_batches]


def remote_losses(name: str, host_batches) -> list[float]:
    target = get_target(name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    losses = [target.run_step(trainable, target.move_batch(b)) for b in host_batches]
    target.sync()
    return [float(loss) for loss in losses]


def wait_until(condition, timeout_s: float = 10.0) -> bool:
    """Whether `condition` holds within `timeout_s`. Garbage is collected (what a session left in
    reference cycles) only while it does not hold: a full collection in a process that has imported
    torch costs a tenth of a second or more."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        gc.collect()
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def raw_session(server, messages: list[pb.ClientMessage], metadata=()) -> grpc.RpcError:
    channel = grpc.insecure_channel(str(server.address), options=CLIENT_OPTIONS)
    try:
        replies = pb_grpc.TrainerStub(channel).Session(iter(messages), metadata=metadata, timeout=30)
        with pytest.raises(grpc.RpcError) as caught:
            for _ in replies:
                pass
        return caught.value
    finally:
        channel.close()


def opened(server, workload: str = "mahjong", target: str | None = None, sha256: str | None = None) -> pb.ClientMessage:
    return pb.ClientMessage(open=pb.Open(workload=workload, size="tiny", seed=0, target=target or server.host.target_name,
                                         workload_sha256=sha256 or identify(WORKLOAD).definition_sha256))


def batch_messages(batch: dict[str, torch.Tensor], batch_id: int = 1) -> list[pb.ClientMessage]:
    messages = [pb.ClientMessage(batch_tensor=pb.BatchTensor(batch_id=batch_id, chunk=chunk))
                for name, tensor in batch.items() for chunk in tensor_chunks(name, tensor)]
    return messages + [pb.ClientMessage(batch_end=pb.BatchEnd(batch_id=batch_id))]
