"""Workload identities on the wire: what a server says it builds, and whether it is the client's.

A name alone does not say which workload a server would build: two users' `charlm` share it, and
one user's `charlm` changes with its code. So the server describes each workload it builds by its
identity (`trainspeed/workloads/identity.py`: the defining module, a declared version, a sha256 of
the defining sources), and the client compares the hash with that of its own definition before
anything runs; the server checks the hash again when a session opens.
"""

from __future__ import annotations

from typing import Iterable

from trainspeed.rows import SHORT_HASH
from trainspeed.wire import remote_pb2 as pb
from trainspeed.workloads.identity import WorkloadIdentity


def to_wire(identity: WorkloadIdentity) -> pb.ServedWorkload:
    return pb.ServedWorkload(name=identity.name, module=identity.module, version=identity.version or "",
                             definition_sha256=identity.definition_sha256)


def _described(module: str, version: str | None, sha256: str) -> str:
    declared = f", version {version}" if version else ""
    return f"module {module}{declared}, sha256 {sha256[:SHORT_HASH]}"


def why_not_served(served: Iterable[pb.ServedWorkload], identity: WorkloadIdentity) -> str | None:
    """None when the server builds this very definition; else what differs, for one line."""
    by_name = {workload.name: workload for workload in served}
    match = by_name.get(identity.name)
    if match is None:
        return (f"does not build workload {identity.name!r} (it builds {', '.join(by_name) or 'nothing'}); start it with "
                f"`trainspeed serve --workload {identity.module}:FACTORY` on the same code")
    if match.definition_sha256 != identity.definition_sha256:
        return (f"builds another definition of workload {identity.name!r} "
                f"(server: {_described(match.module, match.version, match.definition_sha256)}; here: "
                f"{_described(identity.module, identity.version, identity.definition_sha256)}); "
                "run the same code on both machines")
    return None
