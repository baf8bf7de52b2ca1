"""Sizes and timeouts both ends of the wire agree on, and the gRPC channel options that set them.

Tensors cross in chunks of 1 MiB, the chunk size XLA's own remote proxy uses: large enough that
per-message costs vanish next to the bytes, small enough that no message comes near a limit. The
largest message either side accepts leaves room for a chunk and its header; anything larger is
refused by gRPC itself (RESOURCE_EXHAUSTED) before it reaches the server's code.

Keepalive pings every 10 s (answered by gRPC's own threads, also while a step computes) notice a
peer that vanished without closing its connection, so neither side waits for ever on a dead one.
A peer that is alive but silent is the server's idle timeout's: a connection with no call is
closed after it (`grpc.max_connection_idle_ms`), a session that sends nothing is ended after it.
"""

from __future__ import annotations

CHUNK_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 4 << 20
MAX_TENSOR_BYTES = 16 << 30
"""The largest single tensor a server accepts (a batch tensor or a state tensor)."""
KEEPALIVE_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 10_000
CONNECT_TIMEOUT_S = 10.0
"""How long the client waits for a server to answer its first call."""
REPLY_TIMEOUT_S = 600.0
"""How long the client waits for one reply (a step, a state) before it gives up on the server. A
first step that compiles (torch.compile, XLA) can take minutes; a dead server is noticed sooner,
by the closed connection or the keepalive pings."""

MESSAGE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", KEEPALIVE_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
CLIENT_OPTIONS = MESSAGE_OPTIONS + KEEPALIVE_OPTIONS


def server_options(idle_timeout_s: float) -> list[tuple[str, int]]:
    """The server's channel options; a connection without a call for `idle_timeout_s` is closed
    (a session's own idleness is the session's to end: `trainspeed/serve/session.py`)."""
    return MESSAGE_OPTIONS + KEEPALIVE_OPTIONS + [
        # Let clients ping as often as they are configured to (the default minimum interval is 5 min,
        # and a client pinging more often would be sent away).
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
        ("grpc.max_connection_idle_ms", max(1, int(idle_timeout_s * 1000))),
        # A connection that never finishes its TLS or HTTP/2 handshake is dropped as soon.
        ("grpc.server_handshake_timeout_ms", max(1, int(idle_timeout_s * 1000))),
        # A second server on the same port must fail to bind, not silently share the port.
        ("grpc.so_reuseport", 0),
    ]
