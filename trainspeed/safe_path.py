"""Python child processes that import nothing from the folder a command runs in.

`python -m module` and `python -c code` put the current directory first on `sys.path`, so a
`torch.py` (or `numpy.py`, `pickle.py`) in the folder a command runs from, such as a results or
data folder received from someone, would run in every child that imports it. The `trainspeed`
command (a console script) never has that folder on its path, and the processes it starts must not
either: the elastic agent, the ranks, the commands a study runs (`python -m ...`), and evaluation
workers (`multiprocessing` spawn starts them as `python -c ...`, which imports the standard
library's `pickle`, `socket`, `threading` from the current directory before it takes on its
parent's path).

They are all started with `PYTHONSAFEPATH=1` (Python 3.11's `-P`), which leaves the current
directory off their path. It is an environment variable, not a flag, because every process below
them inherits it: the ranks torchrun's agent starts, a supervisor's rank, spawn workers, the
helpers a library starts in a rank. The children still run in the user's working directory, so a
relative path means what the user meant; only the import path changes. A module of the user's (a
workload named `package.module:factory`) is found through PYTHONPATH, as for the command itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

SAFE_PATH_VARIABLE = "PYTHONSAFEPATH"
"""Python's switch (any non-empty value) that keeps the current directory off `sys.path`."""


def isolated_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's environment by default) for a Python child, and every process below
    it, that imports nothing from its working directory."""
    isolated = dict(os.environ if env is None else env)
    isolated[SAFE_PATH_VARIABLE] = "1"
    return isolated


@contextmanager
def children_isolated() -> Iterator[None]:
    """While it lasts, the children that take this process's own environment (`multiprocessing`'s
    spawn workers and its resource tracker, which cannot be given one) import nothing from their
    working directory; the environment is as it was afterwards."""
    previous = os.environ.get(SAFE_PATH_VARIABLE)
    os.environ[SAFE_PATH_VARIABLE] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(SAFE_PATH_VARIABLE, None)
        else:
            os.environ[SAFE_PATH_VARIABLE] = previous
