"""`trainspeed serve` against clients that do it right and clients that do not: the same losses as a
local run, states that round-trip, one clear status for every bad request while the server goes on
serving, sessions freed when clients vanish, and clients that fail fast when the server vanishes."""

from __future__ import annotations

import io
import subprocess
import textwrap
import threading
import time

import grpc
import pytest
import torch
from child_commands import ServeProcess, python_argv, start_child
from serve_runs import (
    WORKLOAD,
    batch_messages,
    batches,
    local_losses,
    opened,
    raw_session,
    remote_losses,
    wait_until,
)

from trainspeed.cli import main
from trainspeed.errors import DeviceLost, UsageError
from trainspeed.serve.config import ServeConfig
from trainspeed.serve.server import start_server
from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.limits import MAX_MESSAGE_BYTES
from trainspeed.workloads.mahjong.encoding import FEATURE_SHAPE

PLANES = FEATURE_SHAPE[0]


@pytest.fixture(scope="module")
def two_batches_run_locally() -> tuple[list[dict[str, torch.Tensor]], list[float]]:
    """Two Mahjong batches and their losses in a local run: a server that serves on after a bad
    request or a vanished peer trains them to the same losses, bit for bit. The local run is the
    same in every such test (same seed, batches and threads), so it runs once for the module."""
    host_batches = batches(2)
    return host_batches, local_losses(host_batches)


@pytest.mark.parametrize("switches", ["", "/in-flight=3"])
def test_remote_losses_equal_local_ones_bit_for_bit(server, switches):
    host_batches = batches(5)
    assert remote_losses(server.remote_name + switches, host_batches) == local_losses(host_batches)
    assert wait_until(lambda: server.host.live_sessions == 0)


def test_pipelined_steps_return_losses_filled_in_by_sync(server):
    target = get_target(server.remote_name + "/in-flight=2")
    trainable = target.build(WORKLOAD, "tiny", 0)
    batch = target.move_batch(batches(1)[0])
    first = target.run_step(trainable, batch)
    second = target.run_step(trainable, batch)
    assert not torch.isnan(first) and torch.isnan(second)  # the second is still in flight
    target.sync()
    assert not torch.isnan(second)
    fields = target.row_fields()
    assert fields["transport"] == "grpc" and fields["link"] == "loopback" and fields["in_flight"] == 2
    assert fields["server_step_s"] > 0 and fields["bytes_received_per_step"] > 0


def test_host_fed_steps_send_their_batch_and_device_fed_steps_a_handle(server):
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    host_batch = batches(1, batch_size=64)[0]
    nbytes = sum(t.nbytes for t in host_batch.values())
    for _ in range(3):
        target.run_step(trainable, target.move_batch(host_batch))
    assert nbytes < target.row_fields()["bytes_sent_per_step"] < nbytes * 1.01
    trainable = target.build(WORKLOAD, "tiny", 0)
    resident = target.move_batch(host_batch)
    for _ in range(3):
        target.run_step(trainable, resident)
    assert target.row_fields()["bytes_sent_per_step"] < 100


def test_state_and_rng_round_trip_and_resume_bit_for_bit(server):
    host_batches = batches(6)
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    for batch in host_batches[:3]:
        target.run_step(trainable, target.move_batch(batch))
    state, rng = trainable.state_dict(), target.device_rng_state()
    assert isinstance(state["optimizers"]["policy"]["param_groups"][0]["betas"], tuple)
    later = [float(target.run_step(trainable, target.move_batch(b))) for b in host_batches[3:]]

    resumed = target.build(WORKLOAD, "tiny", 1)  # another seed: the loaded state must override it
    resumed.load_state_dict(state)
    target.set_device_rng_state(rng)
    assert [float(target.run_step(resumed, target.move_batch(b))) for b in host_batches[3:]] == later
    assert local_losses(host_batches)[3:] == later


def test_learning_rates_set_by_the_client_reach_the_server(server):
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    for group in trainable.optimizers["policy"].param_groups:
        group["lr"] = 0.0
    batch = target.move_batch(batches(1)[0])
    losses = [float(target.run_step(trainable, batch)) for _ in range(3)]
    assert losses[0] == losses[1] == losses[2]
    state = trainable.state_dict()
    assert state["optimizers"]["policy"]["param_groups"][0]["lr"] == 0.0


# --- bad requests: one status each, and the server goes on -------------------------------------------
def a_batch(**changes) -> dict[str, torch.Tensor]:
    batch = batches(1)[0]
    batch.update(changes)
    return batch


@pytest.mark.parametrize(
    "case, code, fragment",
    [
        ("oversize", grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
        ("bad dtype", grpc.StatusCode.INVALID_ARGUMENT, "dtype 'float64' is not allowed"),
        ("other dtype", grpc.StatusCode.INVALID_ARGUMENT, "expected float16"),
        ("wrong shape", grpc.StatusCode.INVALID_ARGUMENT, f"expected float16 of shape (16, {PLANES}, 34)"),
        ("bytes and shape disagree", grpc.StatusCode.INVALID_ARGUMENT, "the header says"),
        ("unknown key", grpc.StatusCode.INVALID_ARGUMENT, "not part of this workload's batch"),
        ("missing key", grpc.StatusCode.INVALID_ARGUMENT, "ended without action"),
        ("unknown workload", grpc.StatusCode.NOT_FOUND, "unknown workload 'chess'"),
        ("user workload", grpc.StatusCode.NOT_FOUND, "unknown workload 'os:system'"),
        ("another definition", grpc.StatusCode.FAILED_PRECONDITION, "workload 'mahjong' of this server is another definition"),
        ("impossible empty batch tensor", grpc.StatusCode.RESOURCE_EXHAUSTED, "(its nonzero dimensions), which exceed"),
        ("impossible empty state tensor", grpc.StatusCode.RESOURCE_EXHAUSTED, "(its nonzero dimensions), which exceed"),
        ("state larger than the model's", grpc.StatusCode.RESOURCE_EXHAUSTED, "the client's model can have"),
        ("other target", grpc.StatusCode.FAILED_PRECONDITION, "not cuda:eager:fp32"),
        ("no open", grpc.StatusCode.FAILED_PRECONDITION, "must be open"),
        ("unknown batch", grpc.StatusCode.INVALID_ARGUMENT, "no batch 7"),
        ("bad learning rate", grpc.StatusCode.INVALID_ARGUMENT, "not finite"),
    ],
)
def test_bad_requests_get_a_clear_status_and_the_server_serves_on(server, case, code, fragment, two_batches_run_locally):
    good = batches(1)[0]
    step = pb.ClientMessage(step=pb.Step(seq=2, batch_id=1))
    def raw_chunk(dtype: str, shape: list[int], nbytes: int, data: bytes, last: bool = True) -> pb.TensorChunk:
        return pb.TensorChunk(header=pb.TensorHeader(name="features", dtype=dtype, shape=shape, nbytes=nbytes), data=data,
                              last=last)

    def raw_tensor(dtype: str, shape: list[int], nbytes: int, data: bytes) -> pb.ClientMessage:
        return pb.ClientMessage(batch_tensor=pb.BatchTensor(batch_id=1, chunk=raw_chunk(dtype, shape, nbytes, data)))

    def state_tensor(chunk: pb.TensorChunk) -> pb.ClientMessage:
        return pb.ClientMessage(state_tensor=pb.StateTensor(chunk=chunk))

    huge = 768 << 20  # a state tensor of 768 MiB, its first MiB sent: refused at the header

    messages = {
        "oversize": lambda: [opened(server), pb.ClientMessage(batch_tensor=pb.BatchTensor(
            batch_id=1, chunk=pb.TensorChunk(data=b"\0" * (MAX_MESSAGE_BYTES + 1))))],
        "bad dtype": lambda: [opened(server), raw_tensor("float64", [16, PLANES, 34], 16 * PLANES * 34 * 8, b"")],
        "other dtype": lambda: [opened(server), *batch_messages(a_batch(features=torch.zeros(16, PLANES, 34, dtype=torch.int32)))],
        "wrong shape": lambda: [opened(server), *batch_messages(good), *batch_messages(a_batch(features=torch.zeros(16, PLANES, 33)), 2)],
        "bytes and shape disagree": lambda: [opened(server), raw_tensor("float32", [16, PLANES, 34], 100, b"\0" * 100)],
        "unknown key": lambda: [opened(server), *batch_messages(a_batch(extra=torch.zeros(16)))],
        "missing key": lambda: [opened(server), *batch_messages({k: v for k, v in good.items() if k != "action"})],
        "unknown workload": lambda: [opened(server, workload="chess")],
        "user workload": lambda: [opened(server, workload="os:system")],
        "another definition": lambda: [opened(server, sha256="0" * 64)],
        "impossible empty batch tensor": lambda: [opened(server), raw_tensor("float32", [0, 2**62, 2**62], 0, b"")],
        "impossible empty state tensor": lambda: [opened(server), state_tensor(raw_chunk("float32", [0, 2**62, 2**62], 0, b""))],
        "state larger than the model's": lambda: [opened(server), state_tensor(raw_chunk(
            "float32", [huge // 4], huge, b"\0" * (1 << 20), last=False))],
        "other target": lambda: [opened(server, target="cuda:eager:fp32")],
        "no open": lambda: [step],
        "unknown batch": lambda: [opened(server), pb.ClientMessage(step=pb.Step(seq=2, batch_id=7))],
        "bad learning rate": lambda: [opened(server), *batch_messages(good), pb.ClientMessage(step=pb.Step(
            seq=2, batch_id=1, learning_rates=[pb.LearningRates(optimizer="policy", lr=[float("nan")])]))],
    }[case]()
    error = raw_session(server, messages)
    assert error.code() == code and fragment in error.details(), (error.code(), error.details())
    assert wait_until(lambda: server.host.live_sessions == 0)
    host_batches, local = two_batches_run_locally
    assert remote_losses(server.remote_name, host_batches) == local


def test_a_failure_in_the_servers_reader_reaches_the_client_as_a_status(server, monkeypatch, two_batches_run_locally):
    """Whatever breaks while the server reads a message ends the session with a status that says
    what, never with a silent OK."""
    from trainspeed.serve.batches import BatchLayout

    def broken(self, header):
        raise RuntimeError("the layout check broke")

    monkeypatch.setattr(BatchLayout, "check_header", broken)
    error = raw_session(server, [opened(server), *batch_messages(batches(1)[0])])
    assert error.code() == grpc.StatusCode.INTERNAL, (error.code(), error.details())
    assert "the server failed reading the client's message: RuntimeError: the layout check broke" in error.details()
    monkeypatch.undo()
    assert wait_until(lambda: server.host.live_sessions == 0 and server.host.memory.held_bytes == 0)
    host_batches, local = two_batches_run_locally
    assert remote_losses(server.remote_name, host_batches) == local


def test_a_target_mismatch_is_one_line_before_anything_runs(server):
    with pytest.raises(UsageError, match=r"serves cpu:eager:fp32, not cpu:eager:bf16; name it remote:127\.0\.0\.1:\d+/cpu:eager:fp32"):
        get_target(server.remote_name.replace("fp32", "bf16"))


def test_no_server_is_one_line():
    with pytest.raises(UsageError, match=r"no trainspeed server answers at 127\.0\.0\.1:9 \(.*Connection refused\); start one there"):
        get_target("remote:127.0.0.1:9/cpu:eager:fp32")


def test_a_busy_server_refuses_one_session_too_many(serve):
    server = serve(max_sessions=1)
    target = get_target(server.remote_name)
    first = target.build(WORKLOAD, "tiny", 0)
    from trainspeed.wire.client import RemoteError

    with pytest.raises(RemoteError, match="server busy"):
        target.build(WORKLOAD, "tiny", 0)
    del first


# --- vanishing peers --------------------------------------------------------------------------------
def test_a_client_that_vanishes_mid_stream_frees_its_session(server, two_batches_run_locally):
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    target.run_step(trainable, target.move_batch(batches(1)[0]))
    assert server.host.live_sessions == 1
    trainable.session._call.cancel()  # as a killed client's connection would end
    assert wait_until(lambda: server.host.live_sessions == 0)
    host_batches, local = two_batches_run_locally
    assert remote_losses(server.remote_name, host_batches) == local


def test_a_server_that_stops_fails_the_client_at_once_with_device_lost(serve):
    server = serve()
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    batch = target.move_batch(batches(1)[0])
    target.run_step(trainable, batch)
    server.stop(None)
    # The closed connection says so at once: UNAVAILABLE, not the reply timeout's "sent no reply within".
    with pytest.raises(DeviceLost, match=r"went away during step 2 of its session \(UNAVAILABLE"):
        target.run_step(trainable, batch)
    with pytest.raises(DeviceLost):  # and every later call, without waiting again
        target.sync()


KILLED_CLIENT = textwrap.dedent("""
    import sys, torch
    from trainspeed.targets import get_target
    from trainspeed.workloads import get_workload
    workload = get_workload("mahjong")
    target = get_target(sys.argv[1])
    trainable = target.build(workload, "tiny", 0)
    batch = workload.synthetic_batch("tiny", 256, torch.Generator().manual_seed(0))
    for step in range(10_000):
        target.run_step(trainable, target.move_batch(batch))
        if step == 1:
            print("stepping", flush=True)
""")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_killed_client_process_frees_its_session_and_the_next_client_works(server, two_batches_run_locally):
    client = start_child(python_argv("-c", KILLED_CLIENT, server.remote_name + "/in-flight=2"),
                         stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "stepping"
        assert server.host.live_sessions == 1
    finally:
        client.kill()
        client.wait(30)
    assert wait_until(lambda: server.host.live_sessions == 0, timeout_s=30)
    host_batches, local = two_batches_run_locally
    assert remote_losses(server.remote_name, host_batches) == local


@pytest.mark.e2e
@pytest.mark.slow
def test_a_killed_server_process_fails_the_bench_fast_with_one_line(tmp_path, capsys):
    server = ServeProcess()
    out = tmp_path / "rows.jsonl"
    # The bench runs in this process, in a thread (what is tested is its exit code and its one line,
    # not its process); the server is a process of its own, killed.
    exit_codes: list[int] = []
    bench = threading.Thread(target=lambda: exit_codes.append(main(
        ["bench", "--targets", server.name, "--batch-sizes", "64,128", "--windows", "50", "--min-window-s", "1",
         "--threads", "1", "--no-progress", "--no-plot", "--out", str(out)])), daemon=True)
    bench.start()
    try:
        assert wait_until(lambda: "built" in server.stderr(), timeout_s=60), server.stderr()
        time.sleep(1.0)
        server.kill()
        # Well within the client's 600 s reply timeout: the killed server's closed connection says it.
        bench.join(120)
    finally:
        server.stop()
    bench.join(120)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exit_codes == [1] and len(lines) == 1, err
    assert lines[0].startswith("trainspeed: error: remote server 127.0.0.1:") and "went away" in lines[0]
    assert "sent no reply" not in lines[0], lines[0]


def test_a_second_server_on_a_taken_port_fails_with_one_line(serve, cli_error, capsys):
    port = serve().address.port
    line = cli_error("serve", "--listen", f"127.0.0.1:{port}")
    assert line == (f"trainspeed: error: serve: cannot listen on 127.0.0.1:{port}: the port is taken (another "
                    "server?) or the address is not this machine's")
    assert capsys.readouterr().out == ""


def test_a_second_server_in_process_cannot_share_the_port(serve):
    first = serve()
    with pytest.raises(UsageError, match="cannot listen"):
        serve(listen=str(first.address))


def test_a_server_in_a_program_of_its_own_writes_its_lines_where_told_and_none_on_stderr(capfd):
    """A program (the tests) that runs a server in its own process keeps its stderr for itself: the
    server's lines go to the stream it gives, also those of a session that ends in a thread of its
    own after the caller has moved on (under pytest, they landed in the middle of its report)."""
    lines = io.StringIO()
    running = start_server(ServeConfig(listen="127.0.0.1:0"), log_to=lines)
    try:
        host_batches = batches(1)
        assert remote_losses(running.remote_name, host_batches) == local_losses(host_batches)
        assert wait_until(lambda: "ended after 1 steps; its model is freed" in lines.getvalue()), lines.getvalue()
    finally:
        running.stop(None)
    assert lines.getvalue().startswith(f"trainspeed serve: {running.remote_name} ready (")
    assert capfd.readouterr().err == ""


# --- a step that fails on the server ------------------------------------------------------------------
def failing_step(message: str):
    def run_step(trainable, batch):
        raise RuntimeError(message)

    return run_step


def test_out_of_memory_on_the_server_is_an_oom_and_the_server_serves_on(server, monkeypatch, tmp_results,
                                                                        two_batches_run_locally):
    from trainspeed.bench.config import BenchConfig, TimingPlan
    from trainspeed.bench.sweep import run_sweep

    monkeypatch.setattr(server.host.target, "run_step", failing_step("CUDA out of memory. Tried to allocate 2 GiB"))
    monkeypatch.setattr(server.host.target, "is_oom", lambda error: "out of memory" in str(error))
    config = BenchConfig(workload="mahjong", size="tiny", targets=[server.remote_name], batch_sizes=[8, 16], out=tmp_results,
                         plan=TimingPlan(warmup_steps=1, windows=1, min_window_s=0.01), peak_tflops=1.0)
    rows = run_sweep(config)
    assert [row.status for row in rows] == ["oom", "skipped"]
    assert "out of memory on the server during step 1" in rows[0].error and rows[0].transport == "grpc"
    monkeypatch.undo()
    assert wait_until(lambda: server.host.live_sessions == 0)
    host_batches, local = two_batches_run_locally
    assert remote_losses(server.remote_name, host_batches) == local


def test_a_failed_step_is_one_error_naming_it(server, monkeypatch):
    from trainspeed.wire.client import RemoteError

    monkeypatch.setattr(server.host.target, "run_step", failing_step("shape mismatch in layer 3"))
    target = get_target(server.remote_name)
    trainable = target.build(WORKLOAD, "tiny", 0)
    with pytest.raises(RemoteError, match=r"refused step 1 of its session: INTERNAL: step 1 failed on the server: "
                                          r"RuntimeError: shape mismatch in layer 3"):
        target.run_step(trainable, target.move_batch(batches(1)[0]))


def test_the_client_side_link_emulation_holds_steps_back(server):
    fast, slow = get_target(server.remote_name), get_target(server.remote_name + "/rate=10mbit+rtt=50ms")
    assert slow.link() == "client-side limit rate=10mbit rtt=50ms"
    batch = batches(1, batch_size=56)[0]  # 333 KB: 0.26 s at 10 Mbit/s
    times = []
    for target in (fast, slow):
        trainable = target.build(WORKLOAD, "tiny", 0)
        target.run_step(trainable, target.move_batch(batch))
        started = time.perf_counter()
        target.run_step(trainable, target.move_batch(batch))
        times.append(time.perf_counter() - started)
    # A lower bound, which load cannot break: the emulated link carries the batch no faster than its
    # rate and answers no sooner than its round trip (the server's step then overlaps nothing). The
    # unlimited step is not compared with it: under load it may take longer than that bound.
    assert times[1] >= 0.26 + 0.05, times
