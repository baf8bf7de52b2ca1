"""The settings of `trainspeed serve`, checked before anything listens.

Loopback is the default. Any other listen address exposes a process that runs training steps for
whoever connects, so it needs a token, and TLS unless `--insecure` says explicitly that tokens and
tensors may cross in clear text (a private link, such as the namespaces of `trainspeed study remote`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from trainspeed.errors import UsageError
from trainspeed.flags import THREADS, TIMEOUT, machine_memory_gib, ranged, ranged_as
from trainspeed.wire.address import Address
from trainspeed.wire.credentials import check_key_pair, read_pem, read_token


@dataclass(frozen=True)
class ServeConfig:
    target: str = "cpu:eager:fp32"
    """The server's own target (a local family): every session's model runs there."""
    listen: str = "127.0.0.1:50051"
    """HOST:PORT to listen on; port 0 picks a free port (printed when ready)."""
    token_file: str | None = None
    """File holding the token clients must send; required on a non-loopback address."""
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False
    """Allow a non-loopback address without TLS (the token and tensors cross in clear text)."""
    threads: int | None = ranged_as(None, THREADS)
    """torch threads of the server (None leaves torch's default); device_name reports them."""
    max_sessions: int = ranged(4, 1, 1024)
    """Sessions (models) held at once; a client beyond them is refused with RESOURCE_EXHAUSTED."""
    workloads: tuple[str, ...] = ()
    """Workloads this server builds besides the built-in ones, as `package.module:factory`: the
    operator's list, imported at start. A client names one of them; it never names a module."""
    idle_timeout_s: float = ranged_as(60.0, TIMEOUT)
    """A session that sends nothing for this long (one that never opens included) is ended and its
    slot freed, so clients that connect and wait cannot hold every slot."""
    memory_budget_gib: float | None = ranged(None, 0, machine_memory_gib, low_open=True,
                                             why_high=" GiB, more than this machine's memory")
    """GiB all sessions together may hold: client tensors (batches, states being received), each
    model with its largest optimizer state, and activations where the device measures its memory
    (`serve/memory.py`); None: half of this machine's memory."""

    @property
    def address(self) -> Address:
        return Address.parse(self.listen, "--listen")

    @property
    def uses_tls(self) -> bool:
        return self.tls_cert is not None

    def validate(self) -> "ServeConfig":
        """Raise UsageError naming the flag and the fix; reads the token and certificate files."""
        address = self.address
        if self.target.split(":", 1)[0] == "remote":
            raise UsageError("serve: --target must be a local target (cpu, cuda, xla ...), not a remote one")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise UsageError("serve: give both --tls-cert and --tls-key, or neither")
        if self.token_file is not None:
            read_token(self.token_file, "serve: --token-file")
        if self.uses_tls:
            read_pem(self.tls_cert, "serve: --tls-cert")
            read_pem(self.tls_key, "serve: --tls-key")
            check_key_pair(self.tls_cert, self.tls_key)
        if not address.is_loopback:
            if self.token_file is None:
                raise UsageError(
                    f"serve: --listen {address} is not a loopback address: give --token-file (clients send that token)"
                )
            if not self.uses_tls and not self.insecure:
                raise UsageError(
                    f"serve: --listen {address} is not a loopback address: give --tls-cert and --tls-key, or "
                    "--insecure to send the token and tensors in clear text"
                )
        if self.threads is not None and self.threads <= 0:
            raise UsageError(f"serve: --threads must be positive, got {self.threads}")
        if self.max_sessions < 1:
            raise UsageError(f"serve: --max-sessions must be >= 1, got {self.max_sessions}")
        if not (math.isfinite(self.idle_timeout_s) and self.idle_timeout_s > 0):
            raise UsageError(f"serve: --idle-timeout-s must be a positive number of seconds, got {self.idle_timeout_s}")
        if self.memory_budget_gib is not None and not (math.isfinite(self.memory_budget_gib) and self.memory_budget_gib > 0):
            raise UsageError(f"serve: --memory-budget-gib must be a positive number, got {self.memory_budget_gib}")
        for reference in self.workloads:
            if ":" not in reference:
                raise UsageError(f"serve: --workload {reference!r}: write package.module:factory or a library model "
                                 "(timm:NAME, torchvision:NAME, hf:MODEL_TYPE); the built-in workloads are always served")
        return self

    @property
    def memory_budget_bytes(self) -> int:
        if self.memory_budget_gib is not None:
            return int(self.memory_budget_gib * 2**30)
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
