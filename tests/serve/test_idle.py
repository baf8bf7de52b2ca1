"""Clients that connect and then wait cannot hold a server's sessions: a session that sends nothing
for `--idle-timeout-s` (one that never opens included) ends with a status that says why and frees
its slot, while a step that computes longer than that is not idleness."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.client import RemoteError
from trainspeed.wire.limits import CLIENT_OPTIONS

from serve_runs import WORKLOAD, batches, local_losses, opened, remote_losses, wait_until

IDLE_TIMEOUT_S = 2.0
MARGIN_S = 60.0
"""How much longer than the idle timeout the working client may wait for a slot: ample under any load."""


class IdleStream:
    """A real gRPC client that sends `messages` and then nothing, holding its stream open."""

    def __init__(self, server, messages: list[pb.ClientMessage]) -> None:
        self._release = threading.Event()
        self.channel = grpc.insecure_channel(str(server.address), options=CLIENT_OPTIONS)

        def requests():
            yield from messages
            self._release.wait()

        self.call = pb_grpc.TrainerStub(self.channel).Session(requests(), timeout=IDLE_TIMEOUT_S + MARGIN_S)

    def status(self) -> grpc.RpcError:
        """How the server ended the stream (its replies before that are read and dropped)."""
        with pytest.raises(grpc.RpcError) as caught:
            for _ in self.call:
                pass
        return caught.value

    def close(self) -> None:
        self._release.set()
        self.channel.close()


def wait_until_each_holds_a_slot_or_ended(server, streams: list[IdleStream]) -> None:
    """Before a working client starts: every stream has reached the server (none may lose its slot
    to that client), whether it still holds its slot or the idle timeout already ended it."""
    assert wait_until(lambda: server.host.live_sessions + sum(s.call.done() for s in streams) == len(streams),
                      timeout_s=MARGIN_S)


def build_when_a_slot_frees(target, deadline_s: float):
    """Build a model, trying again while the server is busy, until `deadline_s` has passed."""
    give_up_at = time.monotonic() + deadline_s
    while True:
        try:
            return target.build(WORKLOAD, "tiny", 0)
        except RemoteError as error:
            if "server busy" not in str(error) or time.monotonic() > give_up_at:
                raise
            time.sleep(0.2)


def test_idle_streams_are_ended_and_a_working_client_is_then_served(serve):
    server = serve(max_sessions=2, idle_timeout_s=IDLE_TIMEOUT_S)
    streams = [IdleStream(server, []), IdleStream(server, [opened(server)])]  # never opens; opens, then waits
    try:
        wait_until_each_holds_a_slot_or_ended(server, streams)
        target = get_target(server.remote_name)
        trainable = build_when_a_slot_frees(target, IDLE_TIMEOUT_S + MARGIN_S)
        host_batches = batches(2)
        losses = [float(target.run_step(trainable, target.move_batch(b))) for b in host_batches]
        assert losses == local_losses(host_batches)
        for stream in streams:
            status = stream.status()
            assert status.code() == grpc.StatusCode.DEADLINE_EXCEEDED, (status.code(), status.details())
            assert f"sent nothing to compute for {IDLE_TIMEOUT_S:g} s (no step, batch or state; this server's " \
                   "--idle-timeout-s)" in status.details()
    finally:
        for stream in streams:
            stream.close()
    del trainable
    assert wait_until(lambda: server.host.live_sessions == 0)


def ended_by_the_server(status: grpc.RpcError) -> bool:
    """Whether the server ended the call (not the client's own deadline, which also reads
    DEADLINE_EXCEEDED but with gRPC's own details): a reply that waited the idle timeout to be sent
    cancels it (CANCELLED); where the client's window took every reply, the session then sat idle,
    and the server refused it, saying so (DEADLINE_EXCEEDED). Which comes first depends on how fast
    a loaded machine sends; either frees the slot."""
    if status.code() == grpc.StatusCode.CANCELLED:
        return status.details() != "Locally cancelled by application!"
    return status.code() == grpc.StatusCode.DEADLINE_EXCEEDED and "--idle-timeout-s" in (status.details() or "")


def test_a_client_that_reads_no_replies_is_cut_off_and_a_working_client_is_then_served(serve):
    """Flow control holds a reply the client does not read, so the server waits to send it; after
    the idle timeout it ends the call instead of holding the slot for ever."""
    server = serve(max_sessions=1, idle_timeout_s=IDLE_TIMEOUT_S)
    states = [pb.ClientMessage(get_state=pb.GetState(seq=seq, part=pb.TRAINABLE)) for seq in range(2, 42)]
    stalled = IdleStream(server, [opened(server), *states])  # 40 states of about 1 MB, none read
    try:
        wait_until_each_holds_a_slot_or_ended(server, [stalled])
        target = get_target(server.remote_name)
        trainable = build_when_a_slot_frees(target, IDLE_TIMEOUT_S + MARGIN_S)
        host_batches = batches(2)
        assert [float(target.run_step(trainable, target.move_batch(b))) for b in host_batches] == local_losses(host_batches)
        status = stalled.status()
        assert ended_by_the_server(status), (status.code(), status.details())
    finally:
        stalled.close()


def test_a_step_that_computes_longer_than_the_idle_timeout_is_not_idleness(serve, monkeypatch):
    server = serve(idle_timeout_s=1.0)
    real_step = server.host.target.run_step

    def slow_step(trainable, batch):
        time.sleep(2.0)  # twice the idle timeout, during which the client waits for this step
        return real_step(trainable, batch)

    monkeypatch.setattr(server.host.target, "run_step", slow_step)
    host_batches = batches(2)
    assert remote_losses(server.remote_name, host_batches) == local_losses(host_batches)


def test_the_servers_own_set_up_of_a_session_is_not_the_clients_idleness(serve, monkeypatch):
    """A session alone on the server first resets the device's counters; however long that takes
    (a loaded machine, a cold compiler), the client's idle clock starts after it."""
    server = serve(idle_timeout_s=1.0)
    real_reset = server.host.target.reset_compilation

    def slow_reset():
        time.sleep(2.0)  # twice the idle timeout, before the session reads its first message
        real_reset()

    monkeypatch.setattr(server.host.target, "reset_compilation", slow_reset)
    host_batches = batches(2)
    assert remote_losses(server.remote_name, host_batches) == local_losses(host_batches)


def test_the_time_the_server_takes_to_read_an_open_request_is_not_the_clients_idleness(serve, monkeypatch):
    """Reading an open request counts the model's bytes on the meta device, which a loaded machine
    may take seconds over: the client's idle clock starts when that reading ends."""
    from trainspeed.serve import session

    server = serve(idle_timeout_s=1.0)
    real_count = session.planned_model_bytes

    def slow_count(*args, **kwargs):
        time.sleep(2.0)  # twice the idle timeout, after the open request arrived
        return real_count(*args, **kwargs)

    monkeypatch.setattr(session, "planned_model_bytes", slow_count)
    host_batches = batches(2)
    assert remote_losses(server.remote_name, host_batches) == local_losses(host_batches)


def test_the_server_describes_its_idle_timeout(serve):
    server = serve(idle_timeout_s=7.5)
    assert get_target(server.remote_name).info.idle_timeout_s == 7.5


class BarrierStream:
    """A real gRPC client that opens a session and then only sends a barrier every `every_s`: it
    asks the device for nothing, yet never falls silent."""

    def __init__(self, server, every_s: float) -> None:
        self._stop = threading.Event()
        self.channel = grpc.insecure_channel(str(server.address), options=CLIENT_OPTIONS)

        def requests():
            yield opened(server)
            seq = 1
            while not self._stop.wait(every_s):
                seq += 1
                yield pb.ClientMessage(barrier=pb.Barrier(seq=seq))

        self.call = pb_grpc.TrainerStub(self.channel).Session(requests(), timeout=IDLE_TIMEOUT_S + MARGIN_S)

    def close(self) -> None:
        self._stop.set()
        self.channel.close()


def test_clients_that_only_send_barriers_cannot_hold_every_slot(serve):
    """Barriers every half idle timeout once kept four sessions, every slot, for ever."""
    server = serve(max_sessions=2, idle_timeout_s=IDLE_TIMEOUT_S)
    streams = [BarrierStream(server, IDLE_TIMEOUT_S / 4) for _ in range(2)]
    try:
        assert wait_until(lambda: server.host.live_sessions == 2 or any(s.call.done() for s in streams),
                          timeout_s=MARGIN_S)
        target = get_target(server.remote_name)
        trainable = build_when_a_slot_frees(target, IDLE_TIMEOUT_S + MARGIN_S)
        host_batches = batches(2)
        assert [float(target.run_step(trainable, target.move_batch(b))) for b in host_batches] == local_losses(host_batches)
        for stream in streams:
            with pytest.raises(grpc.RpcError) as ended:
                for _ in stream.call:
                    pass
            assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "sent nothing to compute for" in ended.value.details()
    finally:
        for stream in streams:
            stream.close()
