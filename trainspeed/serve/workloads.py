"""The workloads a server builds: the built-in ones plus its operator's `--workload` list.

Every module is imported when the server starts, from the operator's command line; a client then
names a workload of that list and the hash of its own definition, and the session opens only when
both agree. Nothing a client sends is ever imported, so a client cannot make the server run code
of its choosing; and a definition the client does not share cannot run under its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import grpc

from trainspeed.errors import UsageError
from trainspeed.serve.refusal import Refusal
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire.identity import to_wire
from trainspeed.workloads import BUILTIN_WORKLOADS, get_workload
from trainspeed.workloads.base import Workload
from trainspeed.workloads.identity import WorkloadIdentity, identify


@dataclass(frozen=True)
class ServedWorkload:
    reference: str
    """What the server's operator named: a built-in name or `package.module:factory`."""
    identity: WorkloadIdentity


class WorkloadList:
    """The server's workloads by name: clients name them, so a name stands for one definition."""

    def __init__(self, served: Iterable[ServedWorkload]) -> None:
        self._by_name = {entry.identity.name: entry for entry in served}

    @classmethod
    def load(cls, references: Iterable[str]) -> "WorkloadList":
        """The built-in workloads and `references` (imported now); UsageError for one that does
        not load, or whose name another one has."""
        served: dict[str, ServedWorkload] = {}
        for reference in [*BUILTIN_WORKLOADS, *references]:
            identity = identify(get_workload(reference))
            if identity.name in served:
                raise UsageError(f"serve: --workload {reference} is named {identity.name!r}, as is "
                                 f"{served[identity.name].reference}; a client names workloads by name, so give it another")
            served[identity.name] = ServedWorkload(reference, identity)
        return cls(served.values())

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def describe(self) -> list[pb.ServedWorkload]:
        return [to_wire(entry.identity) for entry in self._by_name.values()]

    def open(self, name: str, definition_sha256: str) -> Workload:
        """A fresh instance of the named workload, when the client's definition is this server's."""
        entry = self._by_name.get(name)
        if entry is None:
            raise Refusal(grpc.StatusCode.NOT_FOUND, f"unknown workload {name!r}; this server builds {', '.join(self.names)}")
        if definition_sha256 != entry.identity.definition_sha256:
            raise Refusal(grpc.StatusCode.FAILED_PRECONDITION,
                          f"workload {name!r} of this server is another definition (sha256 "
                          f"{entry.identity.definition_sha256}) than the client's ({definition_sha256 or 'none given'})")
        return get_workload(entry.reference)
