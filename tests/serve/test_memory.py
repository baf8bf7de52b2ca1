"""What client tensors may occupy on a server: a state no larger than the session's model can have,
and all sessions' batches, states and models within the server's budget; a client beyond either is
told which limit, before its bytes are taken (a model and a sample of a client's size are counted
on the meta device, never allocated first), and the server serves on."""

from __future__ import annotations

import re
import threading
import time

import grpc
import psutil
import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.serve.memory import SessionMemory, StateLimit, model_bytes
from trainspeed.serve.refusal import Refusal
from trainspeed.serve.session import RequestReader
from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.client import RemoteError
from trainspeed.wire.limits import CLIENT_OPTIONS
from trainspeed.wire.state import nested_tensors
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import setup_optimizers
from trainspeed.workloads.identity import identify
from trainspeed.workloads.mahjong.workload import MahjongWorkload
from trainspeed.workloads.meta import CheckStopped, device_of, run_without_memory

from child_commands import ServeProcess
from serve_runs import WORKLOAD, batches, local_losses, raw_session, remote_losses, wait_until

SAMPLE_BYTES = sum(tensor.element_size() * tensor[0].numel()
                   for tensor in WORKLOAD.synthetic_batch("tiny", 1, torch.Generator()).values())
"""Bytes of one Mahjong sample on the wire (its batch tensors' bytes per sample: 5,938 for 86 float16 planes)."""


def _tiny_model_bytes() -> int:
    trainable = WORKLOAD.build("tiny", seed=0)
    setup_optimizers(trainable, fused=False)
    return model_bytes(trainable)


def test_sessions_share_the_servers_budget_and_get_it_back_when_they_end(serve):
    model = _tiny_model_bytes()
    budget_bytes = 2 * model + (1 << 20)  # two models, and 1 MiB for their batches
    server = serve(memory_budget_gib=budget_bytes / 2**30)
    assert get_target(server.remote_name).info.memory_budget_bytes == budget_bytes
    held_batch = batches(1, batch_size=120)[0]  # 713 KB: one fits beside the two models, two do not
    assert 2**20 / 2 < 120 * SAMPLE_BYTES < 2**20

    first_target, second_target = get_target(server.remote_name), get_target(server.remote_name)
    first = first_target.build(WORKLOAD, "tiny", 0)
    first_batch = first_target.move_batch(held_batch)
    first_target.run_step(first, first_batch)
    assert server.host.memory.held_bytes == model + 120 * SAMPLE_BYTES

    second = second_target.build(WORKLOAD, "tiny", 0)
    assert server.host.memory.held_bytes == 2 * model + 120 * SAMPLE_BYTES
    with pytest.raises(RemoteError, match=r"RESOURCE_EXHAUSTED: batch \d+ tensor '\w+' \(.* MiB\) does not fit the "
                                          r"server's memory budget for client tensors and models \(.* MiB, its "
                                          r"--memory-budget-gib\)"):
        second_target.run_step(second, second_target.move_batch(held_batch))

    del first, first_batch, second
    assert wait_until(lambda: server.host.live_sessions == 0 and server.host.memory.held_bytes == 0)
    host_batches = batches(2, batch_size=120)
    assert remote_losses(server.remote_name, host_batches) == local_losses(host_batches)


@pytest.mark.parametrize("name, size", [("mahjong", "tiny"), pytest.param("stylegan3", "tiny-t", marks=pytest.mark.slow)])
def test_a_trained_models_state_fits_the_limit_its_fresh_model_sets(name, size):
    """The limit must let every real resume through: a state after training steps (the optimizers'
    moments filled in) is within the limit the freshly built model gives its session."""
    workload = get_workload(name)
    target = get_target("cpu:eager:fp32")
    trainable = target.build(workload, size, 0)
    limit = StateLimit.of(trainable)
    batch = target.move_batch(workload.synthetic_batch(size, 2, torch.Generator().manual_seed(0)))
    for _ in range(2):
        target.run_step(trainable, batch)
    trained = list(nested_tensors(trainable.state_dict()))
    assert sum(t.numel() * t.element_size() for t in trained) <= limit.nbytes
    assert len(trained) <= limit.tensors


def test_a_model_that_does_not_fit_the_budget_is_refused_when_built_and_the_server_serves_on(serve):
    """A client could once build models (850 MB each at `large`) outside the budget, which counted
    only the tensors it sent: the model and its optimizer state count from the moment it is built."""
    model = _tiny_model_bytes()
    server = serve(memory_budget_gib=1.5 * model / 2**30)  # one model fits, two do not
    first_target, second_target = get_target(server.remote_name), get_target(server.remote_name)
    first = first_target.build(WORKLOAD, "tiny", 0)
    with pytest.raises(RemoteError, match=r"RESOURCE_EXHAUSTED: the mahjong tiny model with its optimizer state "
                                          r"\(.* MiB\) does not fit the server's memory budget"):
        second_target.build(WORKLOAD, "tiny", 0)
    host_batches = batches(1, batch_size=4)
    assert [float(first_target.run_step(first, first_target.move_batch(b))) for b in host_batches] == \
        local_losses(host_batches)
    del first
    assert wait_until(lambda: server.host.live_sessions == 0 and server.host.memory.held_bytes == 0)


class PeakRss:
    """The highest resident memory of a process while a `with` block runs, sampled every 10 ms
    (a sample of a client's size fills gigabytes for seconds)."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.start = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> "PeakRss":
        self._sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._sampler.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def rise_mib(self) -> float:
        return (self.peak - self.start) / 2**20


@pytest.mark.e2e
def test_a_clients_size_is_counted_on_meta_and_refused_before_the_server_allocates_it():
    """A client chose sizes a server once allocated before its budget was asked: a one-sample batch
    of 60,000 px images (10.8 GB) to learn the batch's layout, a 9.8 GB model built before it was
    counted. Both are counted on the meta device now and refused with the server's memory flat."""
    server = ServeProcess("--workload", "timm:resnet18", "--workload", "hf:gpt2", "--memory-budget-gib", "1")
    try:
        for workload, size, refusal in [
            ("timm:resnet18", "tiny,res=60000", r"a batch of 1 sample\(s\) of timm:resnet18 tiny,res=60000 beside its "
                                                r"model \(10299.7 MiB\) does not fit the server's memory budget"),
            ("hf:gpt2", "tiny,vocab_size=4000000", r"the hf:gpt2 tiny,vocab_size=4000000 model with its optimizer state "
                                                   r"\(\d+\.\d MiB\) does not fit the server's memory budget"),
        ]:
            target = server.name.split("/", 1)[1]
            sha256 = identify(get_workload(workload)).definition_sha256
            with PeakRss(server.process.pid) as rss:
                error = raw_session(server, [pb.ClientMessage(open=pb.Open(
                    workload=workload, size=size, seed=0, target=target, workload_sha256=sha256))])
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and re.search(refusal, error.details()), \
                error.details()
            assert rss.rise_mib < 100, (workload, size, rss.rise_mib)
    finally:
        server.stop()
    assert server.process.returncode == 0, server.stderr()[-3000:]


def test_a_size_check_for_a_client_that_has_gone_stops(serve):
    """A client's size is checked in its session's reader; once its call has ended (it left, or the
    idle timeout freed its slot) the check stops instead of computing on for nobody."""
    server = serve(workloads=("hf:gpt2",))
    sha256 = identify(get_workload("hf:gpt2")).definition_sha256
    request = pb.ClientMessage(open=pb.Open(workload="hf:gpt2", size="tiny,n_layer=2", seed=0,
                                            target=server.host.target_name, workload_sha256=sha256))
    gone = RequestReader(server.host, SessionMemory(server.host.memory), client_gone=lambda: True)
    with pytest.raises(Refusal, match=r"--size 'tiny,n_layer=2': the check of hf:gpt2 at it \(.*\) stopped: nobody "
                                      r"waits for it any more$"):
        list(gone.handle(request))
    memory = SessionMemory(server.host.memory)
    (command,) = RequestReader(server.host, memory).handle(request)
    assert command.kind == "open"
    memory.close()


CHECKING = threading.Event()


class SlowCheckWorkload(MahjongWorkload):
    """Mahjong whose size check runs until nobody waits for it: an op on meta every 50 ms, no CPU
    time spent (so only a cancelled call ends it, not the check's time limit)."""

    name = "slow-check"

    def normalize_size(self, size: str | None) -> str:
        CHECKING.set()

        def run(model: torch.nn.Module) -> None:
            while True:
                time.sleep(0.05)
                torch.zeros(1, device=device_of(model))

        try:
            run_without_memory(lambda: torch.nn.Linear(1, 1), run)
        except CheckStopped as stopped:
            raise UsageError(f"--size {size}: the check stopped: {stopped}") from None
        return size or self.default_size


def test_a_stopped_server_returns_after_the_size_checks_of_its_sessions_have_stopped(serve):
    """SIGTERM while a session's reader checked a client's size once aborted the server ("terminate
    called without an active exception"): the process ended under the reader's torch ops. Stopping
    cancels the calls, their checks stop, and `stop` returns once the readers have ended."""
    server = serve(workloads=("test_memory:SlowCheckWorkload",))
    workload = get_workload("test_memory:SlowCheckWorkload")
    open_message = pb.ClientMessage(open=pb.Open(workload="slow-check", size="tiny", seed=0,
                                                 target=server.host.target_name,
                                                 workload_sha256=identify(workload).definition_sha256))
    channel = grpc.insecure_channel(str(server.address), options=CLIENT_OPTIONS)
    leave = threading.Event()

    def messages():
        yield open_message
        leave.wait(120)

    call = pb_grpc.TrainerStub(channel).Session(messages(), timeout=120)
    try:
        assert CHECKING.wait(60)
        server.stop(0.1)
        assert not [thread.name for thread in threading.enumerate() if thread.name.startswith("trainspeed-serve-reader")]
    finally:
        leave.set()
        call.cancel()
        channel.close()
