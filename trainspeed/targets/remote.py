"""A device on another machine (or another process), driven over gRPC: `trainspeed serve` there.

Spelled `remote:HOST:PORT/TARGET[/SWITCHES]`, e.g. `remote:127.0.0.1:50051/cpu:eager:fp32` or
`remote:10.0.0.2:50051/cuda:eager:bf16/in-flight=2`: TARGET is the server's own target (the
server refuses a client that expects another), SWITCHES are this family's own, joined by `+`:

- `in-flight=N`  steps sent ahead of their results (default 1, the study's synchronous client;
                 2 lets the next batch cross while the server computes);
- `link=LABEL`   what lies between client and server, for the rows' `link` (default: "loopback"
                 for a loopback address, else "network");
- `rate=R`, `rtt=T`  a link emulated in the client (`100mbit`, `0.2ms`), where network
                 namespaces are not possible (rows say `client-side limit ...`).

The study's TPU Node ran the training process on one VM and the TPU behind a gRPC link; a TPU VM
ran it on the TPU's host. This family is the Node: the model is built on the server
(`build`), stays there, and every step sends a batch handle and receives the loss. With
`bench --feed device` the batch crosses once and stays on the server (the study's "no data IO");
with `--feed host` (and in training) every step's batch crosses the wire, as torch_xla's XRT
client sent every step's inputs. Token and TLS come from the environment
(TRAINSPEED_REMOTE_TOKEN_FILE, TRAINSPEED_REMOTE_TLS_CA; see `trainspeed/wire/credentials.py`).
"""

from __future__ import annotations

import contextlib
import re
import weakref
from dataclasses import dataclass
from typing import Any, ContextManager

import torch

from trainspeed.nominal_peaks import NominalPeak, nominal_peak
from trainspeed.data.order import SAMPLE_ID_KEY
from trainspeed.errors import UsageError
from trainspeed.targets.base import Target, TargetSpec, is_host_oom
from trainspeed.workloads.base import Batch, Trainable, Workload
from trainspeed.workloads.identity import WorkloadIdentity, identify

NAME_HINT = "write remote:HOST:PORT/device:mode:precision[/in-flight=N+link=LABEL], e.g. remote:127.0.0.1:50051/cpu:eager:fp32"
LABEL = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class RemoteSwitches:
    in_flight: int = 1
    link: str | None = None
    rate: str | None = None
    rtt: str | None = None

    @classmethod
    def parse(cls, text: str, name: str) -> "RemoteSwitches":
        from trainspeed.wire.pacing import parse_duration, parse_rate

        values: dict[str, str] = {}
        for switch in filter(None, text.split("+")):
            key, equals, value = switch.partition("=")
            if not equals or key not in ("in-flight", "link", "rate", "rtt") or not value or key in values:
                raise UsageError(f"bad target {name!r}: unknown, empty or repeated switch {switch!r}; "
                                 "the remote switches are in-flight=N, link=LABEL, rate=R, rtt=T")
            values[key] = value
        in_flight = values.get("in-flight", "1")
        if not in_flight.isdigit() or int(in_flight) < 1:
            raise UsageError(f"bad target {name!r}: in-flight must be a whole number >= 1, got {in_flight!r}")
        if "link" in values and not LABEL.match(values["link"]):
            raise UsageError(f"bad target {name!r}: a link label is letters, digits, '.', '_' and '-'")
        if "rate" in values:
            parse_rate(values["rate"])
        if "rtt" in values:
            parse_duration(values["rtt"])
        return cls(int(in_flight), values.get("link"), values.get("rate"), values.get("rtt"))

    def __str__(self) -> str:
        parts = [f"in-flight={self.in_flight}"] if self.in_flight != 1 else []
        parts += [f"{key}={value}" for key, value in (("link", self.link), ("rate", self.rate), ("rtt", self.rtt)) if value]
        return "+".join(parts)


@dataclass(frozen=True)
class RemoteSpec:
    """A remote target's name: where the server is, the target it serves, this family's switches."""

    address: Any  # trainspeed.wire.address.Address (imported lazily: grpc is an optional extra)
    inner: TargetSpec
    switches: RemoteSwitches

    device = "remote"

    @property
    def mode(self) -> str:
        return self.inner.mode

    @property
    def precision(self) -> str:
        return self.inner.precision

    def __str__(self) -> str:
        switches = str(self.switches)
        return f"remote:{self.address}/{self.inner}" + (f"/{switches}" if switches else "")


class RemoteTarget(Target):
    device_type = "cpu"
    """Batches and losses live in this process's host memory; the device is the server's."""
    data_parallel = "single"
    supports_multi_node = False
    gradients_here = False
    gradients_where = "on the server"

    # --- the name ---------------------------------------------------------------------------------
    @classmethod
    def parse_spec(cls, text: str) -> RemoteSpec:
        from trainspeed.wire.address import Address

        name = text.strip()
        head, _, rest = name.partition(":")
        parts = rest.split("/")
        if head != "remote" or len(parts) not in (2, 3) or not all(parts[:2]):
            raise UsageError(f"bad target {name!r}: {NAME_HINT}")
        address = Address.parse(parts[0], f"address in target {name!r}")
        try:
            inner = TargetSpec.parse(parts[1])
        except UsageError:
            raise UsageError(f"bad target {name!r}: the server's target {parts[1]!r} is not device:mode:precision; {NAME_HINT}") from None
        if inner.device == "remote":
            raise UsageError(f"bad target {name!r}: a server serves a local target, not another remote one")
        switches = RemoteSwitches.parse(parts[2] if len(parts) == 3 else "", name)
        return RemoteSpec(address, inner, switches)

    @classmethod
    def check_spec(cls, spec: RemoteSpec) -> None:
        """The syntax is checked by `parse_spec`; the server checks its own target's mode and precision."""

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import google.protobuf  # noqa: F401
            import grpc  # noqa: F401
        except ImportError as error:
            return f"the remote family needs grpcio and protobuf ({error}); pip install 'trainspeed[remote]'"
        return None

    @classmethod
    def check_reachable(cls, spec: RemoteSpec) -> None:
        _check_server(spec, _describe(spec))

    @classmethod
    def check_workload(cls, spec: RemoteSpec, workload: Workload) -> None:
        """The server builds this workload, the same definition as here (name and hash of its
        sources), so a mismatch is one line before any row or run directory is written."""
        from trainspeed.wire.identity import why_not_served

        info = _describe(spec)
        _check_server(spec, info)
        why = why_not_served(info.workloads, _identity(spec, workload))
        if why is not None:
            raise UsageError(f"target {spec}: the server at {spec.address} {why}")

    # --- the connection -----------------------------------------------------------------------------
    def __init__(self, spec: RemoteSpec) -> None:
        super().__init__(spec)
        self.spec: RemoteSpec = spec
        self._connection = _connect(spec)
        self.info = self._connection.describe()
        _check_server(spec, self.info)
        self._sessions: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._current: "weakref.ref[Any] | None" = None
        self._stats: Any = None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return f"{self.info.device_name} (remote, {self.spec.address})"

    def _session(self) -> Any:
        session = self._current() if self._current is not None else None
        if session is None:
            raise RuntimeError(f"target {self}: build a trainable first; batches and states belong to its session")
        return session

    # --- running ------------------------------------------------------------------------------------
    def build(self, workload: Workload, size: str, seed: int) -> Trainable:
        """Open a session: the server builds the workload on its target and keeps it."""
        from trainspeed.wire import remote_pb2 as pb
        from trainspeed.wire.client import Session
        from trainspeed.wire.pacing import Pacer, parse_duration, parse_rate
        from trainspeed.wire.trainable import RemoteTrainable

        switches = self.spec.switches
        pacer = None
        if switches.rate or switches.rtt:
            pacer = Pacer(parse_rate(switches.rate) if switches.rate else None,
                          parse_duration(switches.rtt) if switches.rtt else 0.0)
        request = pb.Open(workload=workload.name, size=size, seed=seed, target=str(self.spec.inner),
                          workload_sha256=_identity(self.spec, workload).definition_sha256)
        session = Session(self._connection, request, in_flight=switches.in_flight, pacer=pacer)
        self._sessions.add(session)
        self._current = weakref.ref(session)
        self._stats = session.stats
        return RemoteTrainable(session)

    def prepare(self, trainable: Trainable) -> Trainable:
        from trainspeed.wire.trainable import RemoteTrainable

        if not isinstance(trainable, RemoteTrainable):
            raise TypeError(f"target {self}: build the trainable with target.build(); it is built on the server")
        return trainable

    def move_batch(self, batch: Batch) -> Any:
        """Send the batch to the server, which keeps it while the returned handle lives. The loader's
        own keys (its sample ids) stay here: the server knows only the workload's batch."""
        return self._session().upload({key: tensor for key, tensor in batch.items() if key != SAMPLE_ID_KEY})

    def autocast(self) -> ContextManager:
        return contextlib.nullcontext()  # the precision applies on the server

    def sync(self) -> None:
        """Wait for every live session; one whose stream failed earlier has nothing left to wait for
        (its failure was raised then), unless it is the current one, whose failure is raised again."""
        current = self._current() if self._current is not None else None
        for session in list(self._sessions):
            if session is current or not session.broken:
                session.sync()

    def is_oom(self, error: BaseException) -> bool:
        from trainspeed.wire.client import RemoteOutOfMemory

        return isinstance(error, RemoteOutOfMemory) or is_host_oom(error)

    def compile_count(self) -> int:
        return self._stats.compile_count if self._stats is not None else 0

    def peak_memory_bytes(self) -> int | None:
        return self._stats.peak_memory_bytes if self._stats is not None else None

    # --- measuring ----------------------------------------------------------------------------------
    def start_timed_windows(self) -> None:
        """The server's step times are summed per window from here on (each sync ends one), so
        `server_step_s` covers the steps `step_time_s` covers."""
        if self._stats is not None:
            self._stats.start_windows()

    def measured_peak_tflops(self) -> float:
        return self._connection.measure_peak()

    def nominal_peak(self) -> NominalPeak | None:
        """The server's chip, by the name its device gives (this family's device_name adds where it is)."""
        return nominal_peak(self.info.device_name, self.spec.precision)

    def link(self) -> str:
        switches = self.spec.switches
        if switches.link:
            return switches.link
        if switches.rate or switches.rtt:
            return f"client-side limit rate={switches.rate or 'unlimited'} rtt={switches.rtt or '0'}"
        return "loopback" if self.spec.address.is_loopback else "network"

    def row_fields(self) -> dict[str, Any]:
        fields = {"transport": "grpc", "link": self.link(), "in_flight": self.spec.switches.in_flight}
        if self._stats is not None:
            fields.update(self._stats.medians())
        return fields

    # --- state ----------------------------------------------------------------------------------------
    def device_rng_state(self) -> Any:
        from trainspeed.wire import remote_pb2 as pb

        return self._session().get_state(pb.RNG)

    def set_device_rng_state(self, state: Any) -> None:
        from trainspeed.wire import remote_pb2 as pb

        self._session().set_state(pb.RNG, state)


def _connect(spec: RemoteSpec) -> Any:
    from trainspeed.wire.client import Connection
    from trainspeed.wire.credentials import ClientCredentials

    return Connection(spec.address, ClientCredentials.from_environment())


def _describe(spec: RemoteSpec) -> Any:
    connection = _connect(spec)
    try:
        return connection.describe()
    finally:
        connection.close()


def _identity(spec: RemoteSpec, workload: Workload) -> WorkloadIdentity:
    try:
        return identify(workload)
    except (OSError, TypeError, ValueError) as error:
        raise UsageError(f"target {spec}: workload {workload.name!r} cannot be identified by its source files "
                         f"({error}); a remote server builds only workloads defined in files it has too") from None


def _check_server(spec: RemoteSpec, info: Any) -> None:
    if info.target != str(spec.inner):
        raise UsageError(f"target {spec}: the server at {spec.address} serves {info.target}, not {spec.inner}; "
                         f"name it remote:{spec.address}/{info.target}")
