"""Running trainspeed commands as a user would (shared by the evaluation tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def train_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def run_trainspeed(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainspeed", *args], env=train_env(), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)
