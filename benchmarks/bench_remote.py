"""The study's TPU Node vs TPU VM figure on one machine: local vs remote training steps over links.

The study drove a TPU from another VM over gRPC (a "TPU Node") and from the TPU's own host (a "TPU
VM"); the direct path was about 5x faster at batch 2048 because every step's inputs crossed the
link. Here the "VM" is `--target` (`cpu:eager:fp32` by default) in the benchmark's own process and
the "Node" is the same target behind `trainspeed serve`, reached as `remote:HOST:PORT/TARGET`, over:

- loopback: the server on 127.0.0.1 beside the client (the wire is gRPC and its copies alone);
- emulated links: the client runs in a network namespace of its own, each link's server in another,
  joined to the client's by a veth pair that `tc` shapes in the kernel on both ends: with `netem`
  (rate and delay) where the kernel has it; where it lacks netem but has `tbf`, the kernel limits
  the rate and the client adds the round trip (the remote family's `rtt=` switch), and the rows'
  `link` says so. Where namespaces are not possible (not root, no `ip`), the client limits its own
  rate too (`link: client-side-...`).

Every link is measured synchronous (in-flight=1, the study's client) and pipelined (in-flight=2:
the next batch crosses while the server computes), host-fed (every step's batch crosses: the
study's case) and device-fed (the batch crosses once and stays on the server; only handles and
losses cross). The machine is shared, so the configurations of one batch size run back to back in
one bench run (the local baseline first, then every link), `--rounds` repeats the whole sweep (the
report takes each configuration's median round), and every bench run holds the shared lock
(`flock`); server and client run `--threads` torch threads each. Each bench run's start prints the
load average, which the log keeps.

Namespaces and veth pairs get names unique to the run and are removed in `finally` and on
SIGINT/SIGTERM/SIGHUP, so parallel runs cannot collide and an interrupted run leaves nothing.

    sudo python benchmarks/bench_remote.py --out docs/results/remote_cpu_mahjong_tiny.jsonl
    python benchmarks/remote_report.py docs/results/remote_cpu_mahjong_tiny.jsonl   # table + figure
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from trainspeed.bench.config import parse_batch_sizes  # noqa: E402
from trainspeed.wire.pacing import parse_duration, parse_rate  # noqa: E402

LOCK = "/tmp/trainspeed-bench.lock"
SERVER_PORT = 50051
TOKEN_VARIABLE = "TRAINSPEED_REMOTE_TOKEN_FILE"


@dataclass(frozen=True)
class Link:
    """`loopback`, or RATE/RTT in tc's spelling (`1gbit/0.2ms`)."""

    rate: str | None
    rtt: str | None

    @classmethod
    def parse(cls, text: str) -> "Link":
        if text == "loopback":
            return cls(None, None)
        rate, _, rtt = text.partition("/")
        parse_rate(rate)
        parse_duration(rtt)
        return cls(rate, rtt)

    @property
    def is_loopback(self) -> bool:
        return self.rate is None

    def half_rtt(self) -> str:
        """netem delays each direction: half the round trip on each end of the pair."""
        return f"{parse_duration(self.rtt) / 2 * 1e6:g}us"

    def tbf_burst(self) -> str:
        """A bucket of 1 ms at the rate (at least 16 KB): large enough for the rate, small enough
        that no step's batch slips through at line speed while the link idled during a step."""
        return f"{max(16 * 1024, int(parse_rate(self.rate) / 8 / 1000))}b"


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=check, capture_output=True, text=True)


def namespaces_possible() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "no ip or tc command"
    probe = f"tsr-probe-{secrets.token_hex(3)}"
    result = run("ip", "netns", "add", probe, check=False)
    run("ip", "netns", "del", probe, check=False)
    return None if result.returncode == 0 else f"ip netns add failed: {result.stderr.strip()}"


class Network:
    """The client's namespace and one server namespace per emulated link, each joined to the
    client's by a shaped veth pair; everything removed on exit (deleting a namespace deletes its
    end of a pair, and with it the pair)."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(3)
        self.client_ns = f"tsr-{self.token}-c"
        self.made: list[str] = []

    def __enter__(self) -> "Network":
        run("ip", "netns", "add", self.client_ns)
        self.made.append(self.client_ns)
        run("ip", "-n", self.client_ns, "link", "set", "lo", "up")
        return self

    def add_link(self, index: int, link: Link) -> tuple[str, str, str]:
        """A server namespace joined to the client's; (namespace, server address, shaping used)."""
        server_ns = f"tsr-{self.token}-s{index}"
        server_dev, client_dev = f"tsr{self.token}s{index}", f"tsr{self.token}c{index}"  # at most 15 characters
        server_ip, client_ip = f"10.213.{index}.1", f"10.213.{index}.2"
        run("ip", "netns", "add", server_ns)
        self.made.append(server_ns)
        run("ip", "-n", server_ns, "link", "add", server_dev, "type", "veth", "peer", "name", client_dev,
            "netns", self.client_ns)
        for ns, dev, ip in ((server_ns, server_dev, server_ip), (self.client_ns, client_dev, client_ip)):
            run("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
        run("ip", "-n", server_ns, "link", "set", "lo", "up")
        return server_ns, server_ip, self._shape(link, ((server_ns, server_dev), (self.client_ns, client_dev)))

    @staticmethod
    def _shape(link: Link, ends: tuple[tuple[str, str], ...]) -> str:
        """netem (rate and delay) where the kernel has it, else tbf (rate; the client adds the delay)."""
        netem = [run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay", link.half_rtt(),
                     "rate", link.rate, "limit", "100000", check=False) for ns, dev in ends]
        if all(result.returncode == 0 for result in netem):
            return "netem"
        for ns, dev in ends:
            run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
            run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", link.rate, "burst", link.tbf_burst(),
                "latency", "100ms")
        return "tbf"

    def __exit__(self, *exc_info: object) -> None:
        for ns in reversed(self.made):
            run("ip", "netns", "del", ns, check=False)

    @staticmethod
    def exec(ns: str | None) -> list[str]:
        return ["ip", "netns", "exec", ns] if ns else []


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Server:
    """`trainspeed serve` (inside a namespace when `prefix` says so); stopped on exit."""

    def __init__(self, prefix: list[str], target: str, listen: str, threads: int, token_file: Path | None) -> None:
        command = [*prefix, sys.executable, "-m", "trainspeed", "serve", "--target", target, "--listen", listen,
                   "--threads", str(threads)]
        if token_file is not None:
            command += ["--token-file", str(token_file), "--insecure"]  # a private veth pair
        self.log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would stop the server
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment(), stdout=subprocess.PIPE,
                                        stderr=self.log, text=True)
        self.name = self.process.stdout.readline().strip()
        if not self.name.startswith("remote:"):
            self.log.seek(0)
            self.stop()
            raise SystemExit(f"the server did not start: {self.log.read().strip()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass(frozen=True)
class RemoteLink:
    """One link's server, as the bench names it (`link=` label and any client-side switches)."""

    server: Server
    label: str
    client_switches: str = ""

    def target(self, in_flight: int) -> str:
        switches = [f"link={self.label}"] + ([self.client_switches] if self.client_switches else [])
        switches += [f"in-flight={in_flight}"] if in_flight > 1 else []
        return f"{self.server.name}/{'+'.join(switches)}"


def start_links(args: argparse.Namespace, links: list[Link], stack: contextlib.ExitStack, token_file: Path) -> tuple[list[RemoteLink], str | None]:
    """A server per link; returns them and the namespace the client runs in (None: this one)."""
    why_not = "--emulation client" if args.emulation == "client" else namespaces_possible()
    network = None
    if why_not is None:
        network = stack.enter_context(Network())
    else:
        print(f"no network namespaces ({why_not}): the client limits its own rate and adds the round trip", flush=True)
    client_prefix = Network.exec(network.client_ns if network else None)
    remote_links = []
    for index, link in enumerate(links, start=1):
        if link.is_loopback or network is None:
            server = Server(client_prefix, args.target, "127.0.0.1:0", args.threads, None)
            stack.callback(server.stop)
            if link.is_loopback:
                remote_links.append(RemoteLink(server, "loopback"))
            else:
                remote_links.append(RemoteLink(server, f"client-side-{link.rate}-rtt-{link.rtt}",
                                               f"rate={link.rate}+rtt={link.rtt}"))
            continue
        server_ns, server_ip, shaping = network.add_link(index, link)
        server = Server(Network.exec(server_ns), args.target, f"{server_ip}:{SERVER_PORT}", args.threads, token_file)
        stack.callback(server.stop)
        if shaping == "netem":
            remote_links.append(RemoteLink(server, f"netns-netem-{link.rate}-rtt-{link.rtt}"))
        else:
            remote_links.append(RemoteLink(server, f"netns-tbf-{link.rate}-client-rtt-{link.rtt}", f"rtt={link.rtt}"))
    return remote_links, network.client_ns if network else None


def bench(args: argparse.Namespace, targets: list[str], feed: str, batch_size: int, client_ns: str | None,
          token_file: Path) -> bool:
    """One `trainspeed bench` run in the client's namespace, under the shared lock, appending to
    --out; False when it failed (the sweep goes on with the next one)."""
    lock = ["flock", args.lock] if shutil.which("flock") else []  # util-linux; absent in some images
    command = [*Network.exec(client_ns), *lock, sys.executable, "-m", "trainspeed", "bench",
               "--workload", "mahjong", "--size", args.size, "--targets", ",".join(targets), "--feed", feed,
               "--batch-sizes", str(batch_size), "--threads", str(args.threads), "--windows", str(args.windows),
               "--min-window-s", str(args.min_window_s), "--min-steps-per-window", str(args.min_steps_per_window),
               "--warmup-steps", str(args.warmup_steps),
               "--baseline", args.target, "--out", str(args.out), "--no-progress", "--no-plot"]
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"== batch {batch_size}, {feed}-fed, load average {load}", flush=True)
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO_ROOT, env=environment(**{TOKEN_VARIABLE: str(token_file)}),
                            text=True, capture_output=True)
    print(result.stdout.strip(), flush=True)
    if result.returncode != 0:
        print(result.stderr.strip(), file=sys.stderr, flush=True)
    print(f"   ({time.monotonic() - started:.0f} s)", flush=True)
    return result.returncode == 0


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C, so every `finally` removes what it made."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", default="loopback,1gbit/0.2ms,100mbit/1ms",
                        help="comma list of loopback and RATE/RTT (tc spelling)")
    parser.add_argument("--emulation", choices=("auto", "client"), default="auto",
                        help="auto: namespaces and tc where possible, else in the client; client: always in the client")
    parser.add_argument("--feeds", default="host,device", type=lambda s: s.split(","))
    parser.add_argument("--target", default="cpu:eager:fp32", help="the local baseline, and what every server serves")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--batch-sizes", default="2^6..2^13")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--min-window-s", type=float, default=0.5)
    parser.add_argument("--min-steps-per-window", type=int, default=4,
                        help="pipelining overlaps steps only inside a window, which ends synced")
    parser.add_argument("--warmup-steps", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="sweeps over every batch size and link")
    parser.add_argument("--lock", default=LOCK, help="the shared lock every bench run holds")
    parser.add_argument("--out", type=Path, default=Path("results/remote.jsonl"))
    return parser.parse_args(argv)


def sweep(args: argparse.Namespace, batch_sizes: list[int], remote_links: list[RemoteLink], client_ns: str | None,
          token_file: Path) -> int:
    """Every batch size and feed; returns how many bench runs failed."""
    failed = 0
    for batch_size in batch_sizes:
        for feed in args.feeds:
            # Host-fed: synchronous and pipelined; device-fed: only handles cross, synchronous.
            in_flights = (1, 2) if feed == "host" else (1,)
            targets = [args.target] + [link.target(n) for link in remote_links for n in in_flights]
            failed += not bench(args, targets, feed, batch_size, client_ns, token_file)
    return failed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    links = [Link.parse(text) for text in args.links.split(",")]
    batch_sizes = parse_batch_sizes(args.batch_sizes)
    args.out = args.out.resolve()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stop_on_signals()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="trainspeed-remote-")))
        token_file = folder / "token"
        token_file.write_text(secrets.token_hex(32) + "\n")
        remote_links, client_ns = start_links(args, links, stack, token_file)
        failed = 0
        for round_number in range(1, args.rounds + 1):
            print(f"=== round {round_number} of {args.rounds}", flush=True)
            failed += sweep(args, batch_sizes, remote_links, client_ns, token_file)
    print(f"rows appended to {args.out}; table and figure: python benchmarks/remote_report.py {args.out}")
    if failed:
        print(f"bench_remote: error: {failed} bench run(s) failed; their errors are above", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
