"""Who may use the server: a shared token checked on every call, and TLS.

The token travels as `authorization: Bearer TOKEN` metadata. The interceptor looks at every
metadata entry of every call, compares each `authorization` value with `hmac.compare_digest` (its
time does not depend on where a guess goes wrong) without stopping at the first, and lets the
call through only when there is at least one and every one matches; any other call ends with
UNAUTHENTICATED before it reaches the server's code.
"""

from __future__ import annotations

import hmac
from typing import Any, Callable

import grpc

from trainspeed.wire.credentials import TOKEN_METADATA_KEY, bearer, read_pem

REFUSAL = "missing or wrong token"


def token_matches(metadata: Any, expected: bytes) -> bool:
    seen = matched = 0
    for key, value in metadata or ():
        if key != TOKEN_METADATA_KEY:
            continue
        seen += 1
        given = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
        matched += hmac.compare_digest(given, expected)
    return seen > 0 and matched == seen


def _refuse(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, REFUSAL)


def _refusal_like(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same streaming kind that refuses the call."""
    make: Callable[..., grpc.RpcMethodHandler]
    if handler.request_streaming and handler.response_streaming:
        make = grpc.stream_stream_rpc_method_handler
    elif handler.request_streaming:
        make = grpc.stream_unary_rpc_method_handler
    elif handler.response_streaming:
        make = grpc.unary_stream_rpc_method_handler
    else:
        make = grpc.unary_unary_rpc_method_handler
    return make(_refuse, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)


class TokenInterceptor(grpc.ServerInterceptor):
    def __init__(self, token: str) -> None:
        self._expected = bearer(token).encode("utf-8")

    def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None or token_matches(handler_call_details.invocation_metadata, self._expected):
            return handler
        return _refusal_like(handler)


def server_tls_credentials(cert_file: str, key_file: str) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([(read_pem(key_file, "--tls-key"), read_pem(cert_file, "--tls-cert"))])
