"""The gRPC server: the Trainer service on one target, its limits, and the port it binds.

The port is bound exclusively (`grpc.so_reuseport` 0): a second server on a port already served
fails to start, with one line, instead of silently sharing the port and the clients. gRPC reports
a failed bind as port 0 (or, in some versions, an exception); both become a UsageError.
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass
from typing import Iterable, Iterator, TextIO

import grpc

from trainspeed.errors import UsageError
from trainspeed.serve.auth import TokenInterceptor, server_tls_credentials
from trainspeed.serve.config import ServeConfig
from trainspeed.serve.host import DeviceHost
from trainspeed.serve.memory import MemoryBudget
from trainspeed.serve.session import serve_session
from trainspeed.serve.workloads import WorkloadList
from trainspeed.targets import get_target
from trainspeed.targets.threads import configure_threads
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.address import Address
from trainspeed.wire.credentials import read_token
from trainspeed.wire.limits import server_options

EXTRA_WORKERS = 4
READER_JOIN_S = 30.0
"""How long a stopping server waits for its sessions' readers (a cancelled size check stops within
a few ops; one reading a message ends with its call)."""
"""Worker threads beyond one per session: Describe and MeasurePeak calls, and a refused session."""


class TrainerService(pb_grpc.TrainerServicer):
    def __init__(self, host: DeviceHost) -> None:
        self.host = host

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.ServerInfo:
        return self.host.describe()

    def MeasurePeak(self, request: pb.PeakRequest, context: grpc.ServicerContext) -> pb.PeakReply:
        return pb.PeakReply(tflops=self.host.peak_tflops())

    def Session(self, request_iterator: Iterable[pb.ClientMessage], context: grpc.ServicerContext) -> Iterator[pb.ServerMessage]:
        return serve_session(self.host, request_iterator, context)


@dataclass
class RunningServer:
    server: grpc.Server
    host: DeviceHost
    address: Address
    """Where it listens (the port filled in when --listen asked for port 0)."""

    @property
    def remote_name(self) -> str:
        """The target name a client uses to reach this server."""
        return f"remote:{self.address}/{self.host.target_name}"

    def stop(self, grace_s: float | None = 2.0) -> None:
        """Stop serving; sessions still open are cancelled, and their readers (one may be checking
        a client's size in torch) end before this returns, so the process never exits under them."""
        self.server.stop(grace_s).wait()
        self.host.join_readers(READER_JOIN_S)



def start_server(config: ServeConfig, log_to: TextIO | None = None) -> RunningServer:
    """Check the settings, hold the target, bind the port and start serving; the server's lines go
    to stderr, or to `log_to` (`DeviceHost.log_to`)."""
    config.validate()
    configure_threads(config.threads)
    host = DeviceHost(get_target(config.target), config.max_sessions, WorkloadList.load(config.workloads),
                      MemoryBudget(config.memory_budget_bytes), config.idle_timeout_s, log_to=log_to)
    interceptors = [TokenInterceptor(read_token(config.token_file, "serve: --token-file"))] if config.token_file else []
    workers = config.max_sessions + EXTRA_WORKERS
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainspeed-serve"),
                         interceptors=interceptors, options=server_options(config.idle_timeout_s),
                         maximum_concurrent_rpcs=workers)
    pb_grpc.add_TrainerServicer_to_server(TrainerService(host), server)
    address = config.address
    try:
        if config.uses_tls:
            port = server.add_secure_port(str(address), server_tls_credentials(config.tls_cert, config.tls_key))
        else:
            port = server.add_insecure_port(str(address))
    except RuntimeError:
        port = 0
    if port == 0:
        server.stop(None)
        raise UsageError(f"serve: cannot listen on {address}: the port is taken (another server?) "
                         "or the address is not this machine's")
    server.start()
    running = RunningServer(server, host, Address(address.host, port))
    host.log(f"{running.remote_name} ready ({'TLS' if config.uses_tls else 'no TLS'}, "
             f"{'token required' if config.token_file else 'no token'}, {host.target.device_name()}; builds "
             f"{', '.join(host.workloads.names)}; sessions idle for {config.idle_timeout_s:g} s end; client tensors "
             f"and models within {host.memory.limit_bytes / 2**30:.1f} GiB)")
    return running
