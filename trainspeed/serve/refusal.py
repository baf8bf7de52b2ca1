"""How a server turns down what one client asked: a gRPC status for that client alone."""

from __future__ import annotations

import grpc


class Refusal(Exception):
    """End the session with this gRPC status; the server goes on serving other clients."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
