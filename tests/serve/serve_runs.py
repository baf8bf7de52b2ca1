"""What the remote tests share besides fixtures: the token, the environment of a `trainspeed`
process, `trainspeed serve` in a process of its own, Mahjong batches and their losses locally and
remotely, and raw sessions that send exactly the messages a test gives."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest
import torch
from child_commands import start_child

from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.limits import CLIENT_OPTIONS
from trainspeed.wire.tensors import tensor_chunks
from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import identify

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "0123456789abcdef0123456789abcdef"


def trainspeed_env(*path: str | os.PathLike, **extra: str) -> dict[str, str]:
    """The environment of a `trainspeed` process: this checkout (and `path`) importable."""
    env = dict(os.environ)
    # torch_xla, imported by the test session's conftest, sets GRPC_VERBOSITY for this process's
    # children; a user's shell has it unset.
    env.pop("GRPC_VERBOSITY", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), *map(str, path), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


class ServeProcess:
    """`trainspeed serve` in a process of its own; `name` is the target name it printed. `path`:
    folders its workloads (`--workload`) are imported from."""

    def __init__(self, *args: str, path: tuple[str | os.PathLike, ...] = ()) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would stop the server
        self.process = start_child(
            [sys.executable, "-m", "trainspeed", "serve", "--listen", "127.0.0.1:0", "--threads", "1", *args], env=trainspeed_env(*path), stdout=subprocess.PIPE, stderr=self.log, text=True,
        )
        self.name = self.process.stdout.readline().strip()
        assert self.name.startswith("remote:"), self.stderr()

    @property
    def address(self) -> str:
        """HOST:PORT of the server, from its target name (`remote:HOST:PORT/device:mode:precision`)."""
        return self.name.removeprefix("remote:").split("/", 1)[0]

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


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
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
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
