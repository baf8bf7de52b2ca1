"""What the remote tests share besides fixtures: the token, the environment of a `trainspeed`
process, and `trainspeed serve` in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "0123456789abcdef0123456789abcdef"


def trainspeed_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # torch_xla, imported by the test session's conftest, sets GRPC_VERBOSITY for this process's
    # children; a user's shell has it unset.
    env.pop("GRPC_VERBOSITY", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


class ServeProcess:
    """`trainspeed serve` in a process of its own; `name` is the target name it printed."""

    def __init__(self, *args: str) -> None:
        self.log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would stop the server
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainspeed", "serve", "--listen", "127.0.0.1:0", "--threads", "1", *args],
            cwd=REPO_ROOT, env=trainspeed_env(), stdout=subprocess.PIPE, stderr=self.log, text=True,
        )
        self.name = self.process.stdout.readline().strip()
        assert self.name.startswith("remote:"), self.stderr()

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
