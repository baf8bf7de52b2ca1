"""Finding 2: the same training step run in this process and behind `trainspeed serve` over a link.

The study drove a TPU from another VM over gRPC (a "TPU Node") and from the TPU's own host (a "TPU
VM"); the direct path was about 5x faster at batch 2048 because every step's inputs crossed the
link. Here the "VM" is `--target` in the bench's own process and the "Node" is the same target
behind `trainspeed serve`, reached as `remote:HOST:PORT/TARGET`, over loopback and over emulated
links (`trainspeed.studies.remote.links`: shaped between network namespaces where this process may make
them, else in the client; the rows' `link` says which).

Every link is measured synchronous (in-flight=1, the study's client) and pipelined (in-flight=2:
the next batch crosses while the server computes) when host-fed (every step's batch crosses: the
study's case), and synchronous when device-fed (the batch crosses once; only handles cross). The
configurations of one batch size and feed run back to back in one bench run, the local one first,
so each remote row pairs with the local row of its own run; `--rounds` repeats the whole sweep.
Server and client run `--threads` torch threads each. Writes OUT/remote.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import signal
import tempfile
from pathlib import Path
from types import FrameType
from typing import Iterator

from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.signal_handlers import handling
from trainspeed.studies.checks import check_mahjong_settings
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    child_environment,
    no_progress,
    run_trainspeed,
)
from trainspeed.studies.face import preset_settings
from trainspeed.studies.remote.config import EMULATIONS, PRESETS, RemoteConfig
from trainspeed.studies.remote.links import (
    SERVER_PORT,
    Link,
    Network,
    RemoteLink,
    Server,
    namespaces_possible,
)
from trainspeed.wire.credentials import TOKEN_FILE_VARIABLE

ROWS_FILE = "remote.jsonl"


def check_settings(config: RemoteConfig) -> None:
    """Every setting of its own (the links, the emulation, the counts), and that the remote target runs here."""
    for text in config.links:
        Link.parse(text)
    if config.emulation not in EMULATIONS:
        raise UsageError(f"remote study: --emulation {config.emulation!r}: choose one of {', '.join(EMULATIONS)}")
    for flag, value in (("--threads", config.threads), ("--windows", config.windows), ("--rounds", config.rounds),
                        ("--min-steps-per-window", config.min_steps_per_window)):
        if value < 1:
            raise UsageError(f"remote study: {flag} must be at least 1, got {value}")
    if not 0 < config.min_window_s < float("inf"):
        raise UsageError(f"remote study: --min-window-s must be a positive number, got {config.min_window_s}")
    if config.lock is not None and shutil.which("flock") is None:
        raise UsageError("remote study: --lock needs the flock command (util-linux)")
    try:
        import trainspeed.wire.remote_pb2_grpc  # noqa: F401
    except ImportError as error:
        raise UsageError(f"remote study: the remote target cannot run here ({error}); pip install '.[remote]'") from None


def _in_flights(feed: str) -> tuple[int, ...]:
    """Host-fed: synchronous and pipelined; device-fed: only handles cross, synchronous."""
    return (1, 2) if feed == "host" else (1,)


def units(config: RemoteConfig) -> int:
    return config.rounds * len(config.batch_sizes) * len(config.feeds)


def estimate_s(config: RemoteConfig) -> float:
    """Seconds: a server per link to start, then per bench run its start and, per target, a first
    step, a warm-up and the windows (~1 ms per sample and step at the tiny size on a CPU core)."""
    runs = 0.0
    for batch in config.batch_sizes:
        step = batch * 1e-3
        window = max(config.min_window_s, config.min_steps_per_window * step)
        for feed in config.feeds:
            targets = 1 + len(config.links) * len(_in_flights(feed))
            runs += COMMAND_START_S + targets * (config.windows * window + (2 + config.warmup_steps) * step + 1)
    return COMMAND_START_S * len(config.links) + config.rounds * runs


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end the study like Ctrl-C, so every server and namespace is removed."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with handling((signal.SIGTERM, signal.SIGHUP), stop):
        yield


def start_links(config: RemoteConfig, stack: contextlib.ExitStack, token_file: Path) -> tuple[list[RemoteLink], str | None]:
    """A server per link; returns them and the namespace the client runs in (None: this one)."""
    why_not = "--emulation client" if config.emulation == "client" else namespaces_possible()
    network = None
    if why_not is None:
        network = stack.enter_context(Network())
    else:
        print(f"remote: no network namespaces ({why_not}): the client limits its own rate and adds the round trip",
              flush=True)
    client_prefix = Network.exec(network.client_ns if network else None)
    remote_links = []
    for index, link in enumerate((Link.parse(text) for text in config.links), start=1):
        if link.is_loopback or network is None:
            server = Server(client_prefix, config.target, "127.0.0.1:0", config.threads, None)
            stack.callback(server.stop)
            if link.is_loopback:
                remote_links.append(RemoteLink(server, "loopback"))
            else:
                remote_links.append(RemoteLink(server, f"client-side-{link.rate}-rtt-{link.rtt}",
                                               f"rate={link.rate}+rtt={link.rtt}"))
            continue
        server_ns, server_ip, shaping = network.add_link(index, link)
        server = Server(Network.exec(server_ns), config.target, f"{server_ip}:{SERVER_PORT}", config.threads, token_file)
        stack.callback(server.stop)
        if shaping == "netem":
            remote_links.append(RemoteLink(server, f"netns-netem-{link.rate}-rtt-{link.rtt}"))
        else:
            remote_links.append(RemoteLink(server, f"netns-tbf-{link.rate}-client-rtt-{link.rtt}", f"rtt={link.rtt}"))
    return remote_links, network.client_ns if network else None


BENCH_ERROR_ROWS = 1
"""`trainspeed bench`'s exit code when a configuration failed: its error row says why, and the sweep
goes on with the next batch size."""


def _bench(config: RemoteConfig, targets: list[str], feed: str, batch_size: int, out: Path, client_ns: str | None,
           token_file: Path) -> None:
    """One `trainspeed bench` run in the client's namespace (under the lock, where there is one)."""
    prefix = (*Network.exec(client_ns), *(["flock", config.lock] if config.lock else []))
    result = run_trainspeed("bench", "--workload", "mahjong", "--size", config.size, "--targets", ",".join(targets),
                   "--feed", feed, "--batch-sizes", str(batch_size), "--threads", str(config.threads),
                   "--windows", str(config.windows), "--min-window-s", str(config.min_window_s),
                   "--min-steps-per-window", str(config.min_steps_per_window), "--warmup-steps", str(config.warmup_steps),
                   "--baseline", config.target, "--out", str(out), "--no-progress", "--no-plot",
                   prefix=prefix, env=child_environment(**{TOKEN_FILE_VARIABLE: str(token_file)}), quiet=False,
                   ok=(0, BENCH_ERROR_ROWS))
    if result.returncode == BENCH_ERROR_ROWS:
        print(f"remote: a configuration at batch {batch_size} failed; its error row in {out} says why", flush=True)


def run(config: RemoteConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    check_settings(config)
    out = (Path(config.out) / ROWS_FILE).resolve()
    with _stopped_by_signals(), contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trainspeed-remote-")))
        token_file = folder / "token"
        token_file.write_text(secrets.token_hex(32) + "\n")
        remote_links, client_ns = start_links(config, stack, token_file)
        for round_number in range(config.rounds):
            for batch_size in config.batch_sizes:
                for feed in config.feeds:
                    targets = [config.target] + [link.target(n) for link in remote_links for n in _in_flights(feed)]
                    _bench(config, targets, feed, batch_size, out, client_ns, token_file)
                    progress(1, f"remote: batch {batch_size}, {feed}-fed (round {round_number + 1})")
    return [out]


def preset_config(preset: str, out: Path) -> RemoteConfig:
    return RemoteConfig(out=str(out), **PRESETS[preset])  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> RemoteConfig:
    config = RemoteConfig(out=str(out), **preset_settings(RemoteConfig, PRESETS, args))  # type: ignore[arg-type]
    check(config)
    return config


def rows_files(config: RemoteConfig) -> dict[Path, tuple[str, ...]]:
    """The file of rows the study's benches append to, and the kinds of row it holds."""
    return {Path(config.out) / ROWS_FILE: (ResultRow.KIND,)}


def check(config: RemoteConfig) -> None:
    """Every setting, and the size and target its servers and benches get, before anything starts."""
    check_settings(config)
    check_mahjong_settings("remote", config.size, (config.target,), served=True)
