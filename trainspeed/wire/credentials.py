"""The shared token and TLS certificates, read from files, for both ends of the wire, and whether a
server's key belongs to its certificate.

The client reads its token and the CA that signed the server's certificate from the environment,
which every process a command starts (torchrun ranks, loader workers) inherits:

    TRAINSPEED_REMOTE_TOKEN_FILE   a file holding the server's token (sent as `authorization: Bearer ...`)
    TRAINSPEED_REMOTE_TLS_CA       a PEM file of the CA (or self-signed certificate) the server's
                                   certificate is checked against; set, the client speaks TLS

A token is a line of at least 16 printable ASCII characters (`openssl rand -hex 32 > token`), in a
file of at most 4 KiB that only its owner can read (otherwise a warning says so).
"""

from __future__ import annotations

import os
import ssl
import stat
import sys
from dataclasses import dataclass

from trainspeed.errors import UsageError

TOKEN_FILE_VARIABLE = "TRAINSPEED_REMOTE_TOKEN_FILE"
TLS_CA_VARIABLE = "TRAINSPEED_REMOTE_TLS_CA"
TOKEN_METADATA_KEY = "authorization"
MIN_TOKEN_CHARS = 16
MAX_TOKEN_FILE_BYTES = 4096
"""A token is a line of tens of characters; a token file larger than this is not one."""
MAX_PEM_FILE_BYTES = 1 << 20
"""Far more than a certificate chain or a key takes."""


def read_token(path: str | os.PathLike, what: str) -> str:
    """The token in a file (surrounding whitespace stripped), checked to be usable as one.

    At most `MAX_TOKEN_FILE_BYTES` are read, so a path such as /dev/zero or a large file is refused
    instead of read until memory runs out. A file that group or others may read is used, with one
    warning line: anyone who can read it can use the server."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_TOKEN_FILE_BYTES + 1)
        mode = os.stat(path).st_mode
    except OSError as error:
        raise UsageError(f"{what} {path}: cannot read a token ({error.strerror or error})") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise UsageError(f"{what} {path}: more than {MAX_TOKEN_FILE_BYTES} bytes; a token file holds one line, "
                         "e.g. made by `openssl rand -hex 32`")
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        token = ""
    if len(token) < MIN_TOKEN_CHARS or not token.isprintable() or any(c.isspace() for c in token):
        raise UsageError(
            f"{what} {path}: a token is one line of at least {MIN_TOKEN_CHARS} printable characters without "
            "spaces, e.g. made by `openssl rand -hex 32`"
        )
    if stat.S_ISREG(mode) and mode & (stat.S_IRGRP | stat.S_IROTH):
        _warn_once(f"{what} {path} is readable by group or others (mode {stat.S_IMODE(mode):o}); "
                   f"anyone who can read it can use the server: chmod 600 {path}")
    return token


_warned: set[str] = set()


def _warn_once(line: str) -> None:
    """One warning line per process (the client reads its token once per connection)."""
    if line not in _warned:
        _warned.add(line)
        print(f"trainspeed: warning: {line}", file=sys.stderr, flush=True)


def read_pem(path: str | os.PathLike, what: str) -> bytes:
    """A PEM file's bytes (at most `MAX_PEM_FILE_BYTES` are read, as for a token)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_PEM_FILE_BYTES + 1)
    except OSError as error:
        raise UsageError(f"{what} {path}: {error.strerror or error}") from None
    if len(data) > MAX_PEM_FILE_BYTES or b"-----BEGIN" not in data:
        raise UsageError(f"{what} {path}: not a PEM file")
    return data


def check_key_pair(cert_file: str, key_file: str) -> None:
    """UsageError unless the key is the certificate's, unencrypted (gRPC takes no password).

    gRPC itself only fails to bind the port when they do not fit, which says nothing about why;
    Python's ssl module loads the pair the way OpenSSL will and names the fault. The password
    callback makes an encrypted key fail instead of prompting on the terminal."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file, password=lambda: b"")
    except ssl.SSLError as error:
        if error.reason == "KEY_VALUES_MISMATCH":
            raise UsageError(f"serve: --tls-key {key_file} is not the private key of --tls-cert {cert_file}; "
                             "give the key the certificate was made with") from None
        raise UsageError(f"serve: --tls-cert {cert_file} and --tls-key {key_file} are not a PEM certificate and its "
                         f"unencrypted private key ({error.reason or error.library or error})") from None


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
