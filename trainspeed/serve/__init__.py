"""`trainspeed serve`: the server side of the remote target family.

The server holds models on its own target (its `--target`, a local family: cpu, cuda, xla) and
trains them for clients that connect over gRPC, one model per stream: `server.py` (the gRPC server,
its limits and the port it binds), `session.py` (one stream: receive, check, step, reply, end an
idle one), `batches.py` (what a batch of the session's workload must look like), `memory.py` (the
bytes a session and all sessions may hold), `workloads.py` (the workloads the server builds and
their identities), `host.py` (the device and what sessions share), `refusal.py` (a status for one
client), `auth.py` (the token interceptor and TLS), `config.py` (the flags' dataclass).

It sits above the targets and the bench (it builds models on a target and measures its peak with
the bench's probe) and beside the trainer; the wire format and the client are below the targets
(`trainspeed.wire`), because the remote target family uses them. Nothing the client sends is
unpickled, evaluated or imported: tensors are raw bytes checked against an allow-list of dtypes,
the session's batch layout and its memory limits, states are JSON plus such tensors, and a
workload is named from the operator's list.
"""
