"""The wire between the remote target family and `trainspeed serve`: the gRPC protocol
(`remote.proto` and the modules generated from it), tensors as raw bytes in chunks (`tensors.py`),
nested states as tensors plus JSON (`state.py`), addresses (`address.py`), credentials of both ends
(`credentials.py`), channel options and limits (`limits.py`), workload identities as the server
describes them (`identity.py`), a client-side link emulation (`pacing.py`) and the client's
session (`client.py`).

This package sits below the targets (the remote family uses the client) and above the workloads;
the server (`trainspeed.serve`) sits above the targets, because it builds models on one. Nothing
here unpickles or evaluates what a peer sends.
"""

import os

# A process that talks gRPC and then forks (a trainer starting its loader workers, a command
# starting another) makes gRPC's core print "Other threads are currently calling into gRPC,
# skipping fork() handlers" on the user's terminal at every fork. Its fork handlers exist for
# children that use gRPC themselves, which no child of trainspeed does, so they are switched off
# here, before any module of this package imports grpc (a user's own setting is kept).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
