"""`trainspeed serve`: hold models on this machine's target for remote clients (flags -> ServeConfig)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import threading
from types import FrameType

from trainspeed.errors import UsageError
from trainspeed.flags import config_from_flags, flag_adder
from trainspeed.serve.config import ServeConfig
from trainspeed.signal_handlers import handling

EPILOG = """\
examples:
  trainspeed serve --target cpu:eager:fp32 --listen 127.0.0.1:50051
  trainspeed bench --targets remote:127.0.0.1:50051/cpu:eager:fp32 --feed host   # on the client
  trainspeed serve --target cuda:eager:bf16 --listen 0.0.0.0:50051 --token-file token \\
      --tls-cert server.pem --tls-key server.key
  PYTHONPATH=examples trainspeed serve --workload image_classifier_workload:ImageClassifierWorkload
The first line on stdout is the target name clients use (remote:HOST:PORT/TARGET).
"""


def add_serve_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="hold models on this machine's target for remote clients (gRPC)",
        description="Build and train models on this machine's target for clients that name it "
        "remote:HOST:PORT/TARGET; one model per client stream, freed when the stream ends.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    flag = flag_adder(parser, ServeConfig)

    flag("--target", "target", "this machine's target every model runs on, e.g. cuda:eager:bf16")
    flag("--listen", "listen", "HOST:PORT (port 0: any free port); a non-loopback HOST needs a token and TLS")
    flag("--token-file", "token_file", "file holding the token clients must send")
    flag("--tls-cert", "tls_cert", "PEM certificate of this server")
    flag("--tls-key", "tls_key", "PEM private key of --tls-cert")
    flag("--insecure", "insecure", "allow a non-loopback --listen without TLS (token and tensors in clear text)")
    flag("--threads", "threads", "torch CPU threads of the server")
    flag("--max-sessions", "max_sessions", "models (client streams) held at once")
    parser.add_argument("--workload", dest="workloads", action="append", default=[], metavar="WORKLOAD",
                        help="a workload clients may build besides the built-in ones, as package.module:factory or a "
                        "library model such as timm:resnet18 (repeatable); imported now, "
                        "clients name it and must run the same definition")
    flag("--idle-timeout-s", "idle_timeout_s", "end a session (and free its slot) that sends nothing for this long")
    flag("--memory-budget-gib", "memory_budget_gib",
         "GiB all sessions may hold: client tensors, models with their optimizer state, activations "
         "(default: half this machine's memory)")
    parser.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    # gRPC's core logs a failed bind (and other errors it reports to the caller anyway) on stderr
    # itself; the command says what went wrong in its own one line. GRPC_VERBOSITY=ERROR brings them back.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        from trainspeed.serve.server import start_server
    except ImportError as error:
        raise UsageError(f"serve needs grpcio and protobuf ({error}); pip install 'trainspeed[remote]'") from None

    config = dataclasses.replace(config_from_flags(ServeConfig, args), workloads=tuple(args.workloads))
    running = start_server(config)
    print(running.remote_name, flush=True)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    try:
        with handling((signal.SIGTERM, signal.SIGINT), request_stop):
            while not stop.wait(1.0):
                pass
    finally:
        running.stop()
    return 0
