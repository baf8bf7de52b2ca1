"""`HOST:PORT` addresses as both ends spell them, and whether one stays on this machine.

IPv6 addresses are written in brackets (`[::1]:50051`). Loopback means 127.0.0.0/8, ::1 or the name
`localhost`; the server asks for a token and TLS on any other address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from trainspeed.errors import UsageError

ADDRESS_HINT = "write HOST:PORT, e.g. 127.0.0.1:50051 or [::1]:50051"


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, what: str = "address") -> "Address":
        text = text.strip()
        if text.startswith("["):
            host, bracket, rest = text[1:].partition("]")
            if not bracket or not rest.startswith(":"):
                raise UsageError(f"bad {what} {text!r}: {ADDRESS_HINT}")
            port_text = rest[1:]
        else:
            host, colon, port_text = text.rpartition(":")
            if not colon or ":" in host:
                raise UsageError(f"bad {what} {text!r}: {ADDRESS_HINT}")
        if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise UsageError(f"bad {what} {text!r}: {ADDRESS_HINT}")
        return cls(host, int(port_text))

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
