"""The shared token and TLS certificates, read from files, for both ends of the wire.

The client reads its token and the CA that signed the server's certificate from the environment,
which every process a command starts (torchrun ranks, loader workers) inherits:

    TRAINSPEED_REMOTE_TOKEN_FILE   a file holding the server's token (sent as `authorization: Bearer ...`)
    TRAINSPEED_REMOTE_TLS_CA       a PEM file of the CA (or self-signed certificate) the server's
                                   certificate is checked against; set, the client speaks TLS

A token is a line of at least 16 printable ASCII characters (`openssl rand -hex 32 > token`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError

TOKEN_FILE_VARIABLE = "TRAINSPEED_REMOTE_TOKEN_FILE"
TLS_CA_VARIABLE = "TRAINSPEED_REMOTE_TLS_CA"
TOKEN_METADATA_KEY = "authorization"
MIN_TOKEN_CHARS = 16


def read_token(path: str | os.PathLike, what: str) -> str:
    """The token in a file (surrounding whitespace stripped), checked to be usable as one."""
    try:
        token = Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{what} {path}: cannot read a token ({error})") from None
    if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or any(c.isspace() for c in token):
        raise UsageError(
            f"{what} {path}: a token is one line of at least {MIN_TOKEN_CHARS} printable characters without "
            "spaces, e.g. made by `openssl rand -hex 32`"
        )
    return token


def read_pem(path: str | os.PathLike, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise UsageError(f"{what} {path}: {error.strerror}") from None
    if b"-----BEGIN" not in data:
        raise UsageError(f"{what} {path}: not a PEM file")
    return data


def bearer(token: str) -> str:
    return f"Bearer {token}"


@dataclass(frozen=True)
class ClientCredentials:
    token: str | None = None
    tls_ca: bytes | None = None

    @classmethod
    def from_environment(cls) -> "ClientCredentials":
        token_file = os.environ.get(TOKEN_FILE_VARIABLE)
        ca_file = os.environ.get(TLS_CA_VARIABLE)
        return cls(
            token=read_token(token_file, TOKEN_FILE_VARIABLE) if token_file else None,
            tls_ca=read_pem(ca_file, TLS_CA_VARIABLE) if ca_file else None,
        )

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA_KEY, bearer(self.token)),) if self.token else ()
