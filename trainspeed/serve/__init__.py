"""`trainspeed serve`: the server side of the remote target family.

The server holds models on its own target (its `--target`, a local family: cpu, cuda, xla) and
trains them for clients that connect over gRPC, one model per stream: `server.py` (the gRPC server,
its limits and the port it binds), `session.py` (one stream: receive, check, step, reply),
`batches.py` (what a batch of the session's workload must look like), `auth.py` (the token
interceptor and TLS), `config.py` (the flags' dataclass).

It sits above the targets and the bench (it builds models on a target and measures its peak with
the bench's probe) and beside the trainer; the wire format and the client are below the targets
(`trainspeed.wire`), because the remote target family uses them. Nothing the client sends is
unpickled or evaluated: tensors are raw bytes checked against an allow-list of dtypes and the
session's batch layout, states are JSON plus such tensors.
"""
