"""Session fixtures built once per test run rather than once per worker process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """`build(folder)` once for the whole test run, however many worker processes it has: the
    first worker to need `name` builds it under a lock in the run's shared temporary folder, the
    others wait and read it. For session fixtures that tests only read (a data set, a run): each
    is a child process of many CPU-seconds that every worker would otherwise repeat. A build that
    failed left no `.done` mark: the next worker to need it builds it again from an empty folder,
    so its tests fail with the build's own error rather than with the folder it left behind."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN's parent: this run's
    folder, done = shared / "built_once" / name, shared / "built_once" / f"{name}.done"
    folder.parent.mkdir(exist_ok=True)
    with FileLock(str(shared / "built_once" / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
