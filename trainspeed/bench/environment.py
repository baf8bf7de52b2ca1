"""What a measurement ran on: versions, threads, host. Recorded in every result row."""

from __future__ import annotations

import importlib.metadata
import platform
import socket
from dataclasses import dataclass

import torch


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Environment:
    hostname: str
    python_version: str
    torch_version: str
    torch_xla_version: str | None
    threads: int

    @classmethod
    def capture(cls) -> "Environment":
        return cls(
            hostname=socket.gethostname(),
            python_version=platform.python_version(),
            torch_version=torch.__version__,
            torch_xla_version=_version("torch_xla"),
            threads=torch.get_num_threads(),
        )
