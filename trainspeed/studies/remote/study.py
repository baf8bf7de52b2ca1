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
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Iterator

from trainspeed.bench.config import parse_batch_sizes, parse_feeds
from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.studies.checks import check_mahjong_settings
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    child_environment,
    no_progress,
    run_trainspeed,
)
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
EMULATIONS = ("auto", "client")


@dataclass(frozen=True)
class RemoteConfig:
    out: str
    links: tuple[str, ...] = ("loopback", "1gbit/0.2ms", "100mbit/1ms")
    """loopback or RATE/RTT in tc's spelling."""
    emulation: str = "auto"
    """auto: namespaces and tc where possible, else in the client; client: always in the client."""
    feeds: tuple[str, ...] = ("host", "device")
    target: str = "cpu:eager:fp32"
    """The local baseline, and what every server serves."""
    size: str = "tiny"
    batch_sizes: tuple[int, ...] = tuple(2**k for k in range(6, 14))
    threads: int = 1
    windows: int = 3
    min_window_s: float = 0.5
    min_steps_per_window: int = 4
    """Pipelining overlaps steps only inside a window, which ends synced."""
    warmup_steps: int = 1
    rounds: int = 1
    lock: str | None = None
    """A file every bench run holds (`flock`) on a machine shared with other benchmarks."""

    def check(self) -> None:
        for text in self.links:
            Link.parse(text)
        if self.emulation not in EMULATIONS:
            raise UsageError(f"remote study: --emulation {self.emulation!r}: choose one of {', '.join(EMULATIONS)}")
        for flag, value in (("--threads", self.threads), ("--windows", self.windows), ("--rounds", self.rounds),
                            ("--min-steps-per-window", self.min_steps_per_window)):
            if value < 1:
                raise UsageError(f"remote study: {flag} must be at least 1, got {value}")
        if not 0 < self.min_window_s < float("inf"):
            raise UsageError(f"remote study: --min-window-s must be a positive number, got {self.min_window_s}")
        if self.lock is not None and shutil.which("flock") is None:
            raise UsageError("remote study: --lock needs the flock command (util-linux)")
        try:
            import trainspeed.wire.remote_pb2_grpc  # noqa: F401
        except ImportError as error:
            raise UsageError(f"remote study: the remote target cannot run here ({error}); pip install '.[remote]'") from None


PRESETS: dict[str, dict[str, object]] = {
    "smoke": dict(links=("loopback", "100mbit/1ms"), feeds=("host",), batch_sizes=(64,), windows=1, min_window_s=0.05,
                  min_steps_per_window=2),
    "quick": dict(batch_sizes=(64, 512, 2048), min_window_s=0.3),
    "full": {},
}


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

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


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
    config.check()
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
    values: dict[str, object] = dict(PRESETS[args.preset])
    for name in ("emulation", "target", "size", "threads", "windows", "min_window_s", "min_steps_per_window",
                 "rounds", "lock"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.links is not None:
        values["links"] = tuple(text.strip() for text in args.links.split(",") if text.strip())
    if args.feed is not None:
        values["feeds"] = tuple(parse_feeds(args.feed))
    if args.batch_sizes is not None:
        values["batch_sizes"] = tuple(parse_batch_sizes(args.batch_sizes))
    config = RemoteConfig(out=str(out), **values)  # type: ignore[arg-type]
    check(config)
    return config


def rows_files(config: RemoteConfig) -> dict[Path, tuple[str, ...]]:
    """The file of rows the study's benches append to, and the kinds of row it holds."""
    return {Path(config.out) / ROWS_FILE: (ResultRow.KIND,)}


def check(config: RemoteConfig) -> None:
    """Every setting, and the size and target its servers and benches get, before anything starts."""
    config.check()
    check_mahjong_settings("remote", config.size, (config.target,), served=True)
