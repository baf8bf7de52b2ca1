"""The links of the remote study: loopback, or a rate and round trip between network namespaces.

Where this process may make network namespaces (root, with `ip` and `tc`), the client runs in a
namespace of its own and each emulated link's server in another, joined to the client's by a veth
pair that `tc` shapes in the kernel on both ends: with `netem` (rate and delay) where the kernel has
it; where it lacks netem but has `tbf`, the kernel limits the rate and the client adds the round
trip (the remote family's `rtt=` switch). Elsewhere the client limits its own rate and adds the
round trip (`rate=`, `rtt=`). A link's label says which: `netns-netem-...`, `netns-tbf-...-client-rtt-...`
or `client-side-...`. Namespaces and veth pairs get names unique to the run and are removed when
the study ends, however it ends.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.studies.common import StudyFailed, child_environment, trainspeed_argv
from trainspeed.wire.pacing import parse_duration, parse_rate

SERVER_PORT = 50051
LOOPBACK = "loopback"


@dataclass(frozen=True)
class Link:
    """`loopback`, or RATE/RTT in tc's spelling (`1gbit/0.2ms`)."""

    rate: str | None
    rtt: str | None

    @classmethod
    def parse(cls, text: str) -> "Link":
        if text == LOOPBACK:
            return cls(None, None)
        rate, _, rtt = text.partition("/")
        try:
            parse_rate(rate)
            parse_duration(rtt)
        except (ValueError, UsageError):
            raise UsageError(f"--links: bad link {text!r}; write loopback or RATE/RTT, e.g. 1gbit/0.2ms") from None
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


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=check, capture_output=True, text=True)


def namespaces_possible() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "no ip or tc command"
    probe = f"tsr-probe-{secrets.token_hex(3)}"
    result = _run("ip", "netns", "add", probe, check=False)
    _run("ip", "netns", "del", probe, check=False)
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
        _run("ip", "netns", "add", self.client_ns)
        self.made.append(self.client_ns)
        _run("ip", "-n", self.client_ns, "link", "set", "lo", "up")
        return self

    def add_link(self, index: int, link: Link) -> tuple[str, str, str]:
        """A server namespace joined to the client's; (namespace, server address, shaping used)."""
        server_ns = f"tsr-{self.token}-s{index}"
        server_dev, client_dev = f"tsr{self.token}s{index}", f"tsr{self.token}c{index}"  # at most 15 characters
        server_ip, client_ip = f"10.213.{index}.1", f"10.213.{index}.2"
        _run("ip", "netns", "add", server_ns)
        self.made.append(server_ns)
        _run("ip", "-n", server_ns, "link", "add", server_dev, "type", "veth", "peer", "name", client_dev,
             "netns", self.client_ns)
        for ns, dev, ip in ((server_ns, server_dev, server_ip), (self.client_ns, client_dev, client_ip)):
            _run("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
        _run("ip", "-n", server_ns, "link", "set", "lo", "up")
        return server_ns, server_ip, self._shape(link, ((server_ns, server_dev), (self.client_ns, client_dev)))

    @staticmethod
    def _shape(link: Link, ends: tuple[tuple[str, str], ...]) -> str:
        """netem (rate and delay) where the kernel has it, else tbf (rate; the client adds the delay)."""
        netem = [_run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay", link.half_rtt(),
                      "rate", link.rate, "limit", "100000", check=False) for ns, dev in ends]
        if all(result.returncode == 0 for result in netem):
            return "netem"
        for ns, dev in ends:
            _run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
            _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", link.rate, "burst", link.tbf_burst(),
                 "latency", "100ms")
        return "tbf"

    def __exit__(self, *exc_info: object) -> None:
        for ns in reversed(self.made):
            _run("ip", "netns", "del", ns, check=False)

    @staticmethod
    def exec(ns: str | None) -> list[str]:
        return ["ip", "netns", "exec", ns] if ns else []


class Server:
    """`trainspeed serve` (inside a namespace when `prefix` says so); stopped on exit."""

    def __init__(self, prefix: list[str], target: str, listen: str, threads: int, token_file: Path | None) -> None:
        command = [*prefix, *trainspeed_argv("serve", "--target", target, "--listen", listen, "--threads", str(threads))]
        if token_file is not None:
            command += ["--token-file", str(token_file), "--insecure"]  # a private veth pair
        self.log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would stop the server
        self.process = subprocess.Popen(command, env=child_environment(), stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        self.name = self.process.stdout.readline().strip()
        if not self.name.startswith("remote:"):
            self.process.wait(30)  # it printed no name: it is ending, and its log says why
            self.log.seek(0)
            lines = self.log.read().strip().splitlines()
            self.stop()
            reason = lines[-1].removeprefix("trainspeed: error: ") if lines else "it printed nothing"
            raise StudyFailed(f"the server did not start: {reason}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


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
