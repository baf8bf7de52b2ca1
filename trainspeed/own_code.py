"""Where trainspeed's own code lies, for what must tell it apart from the code it runs.

A child command puts this trainspeed first on its import path, so it runs the same code
(`trainspeed.subcommands`); a check that names the workload's line behind an op passes over the
frames of the machinery (torch, a backend, the standard library, trainspeed itself) but keeps those
of trainspeed's built-in workloads, which are the workload there (the XLA port check, the jax
family's refusals and lowering check). Each needs the package's folder. This module knows it from
its own place, at the bottom of the layers: importing the `trainspeed` package for its `__file__`
would reach up to the package's face, which loads the Python API on a name's first use.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
"""trainspeed's package folder, as Python names the files of its frames."""
IMPORT_ROOT = Path(PACKAGE_DIR).resolve().parent
"""The folder that holds the package: first on a child command's import path."""
BUILT_IN_WORKLOADS_DIR = os.path.join(PACKAGE_DIR, "workloads")


@dataclass(frozen=True)
class Machinery:
    """The folders whose frames are machinery, not the workload's code."""

    skipped: tuple[str, ...]
    """Folders (each ending in a separator) whose frames are passed over."""
    kept: tuple[str, ...]
    """Folders inside them whose frames are the workload's all the same."""

    def is_machinery(self, path: str) -> bool:
        return any(path.startswith(root) for root in self.skipped) and not any(path.startswith(root) for root in self.kept)

    def workload_line(self, frames: traceback.StackSummary) -> str | None:
        """The innermost frame of the workload's own code, as `file:line in function: code`; a
        file under the working folder is named relative to it."""
        for frame in reversed(frames):
            path = os.path.abspath(frame.filename)
            if frame.filename.startswith("<") or self.is_machinery(path):
                continue
            shown = os.path.relpath(path) if path.startswith(os.path.join(os.getcwd(), "")) else path
            code = f": {frame.line.strip()}" if frame.line else ""
            return f"{shown}:{frame.lineno} in {frame.name}{code}"
        return None


def machinery(*libraries: ModuleType) -> Machinery:
    """The libraries' folders, trainspeed's and the standard library's as machinery, trainspeed's
    built-in workloads kept."""
    roots = [*(os.path.dirname(library.__file__) for library in libraries if library.__file__), PACKAGE_DIR,
             sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    return Machinery(skipped=tuple(os.path.join(root, "") for root in roots),
                     kept=(os.path.join(BUILT_IN_WORKLOADS_DIR, ""),))
