"""Debian's Chromium for the browser test: found, or installed with apt-get when missing and the
tests run as root (as CI does on a clean machine); otherwise the reason it cannot be had."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from child_commands import run_child, trainspeed_env

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
"""Besides --headless and a fresh --user-data-dir (both given by the launch): no sandbox (root in a
container), no GPU, and nothing that reaches for the network on its own."""
INSTALL_TIMEOUT_S = 1200


def _apt_get(*arguments: str) -> subprocess.CompletedProcess:
    return run_child(["apt-get", *arguments], env=trainspeed_env(DEBIAN_FRONTEND="noninteractive"),
                     stdin=subprocess.DEVNULL, timeout=INSTALL_TIMEOUT_S)


def ensure_chromium() -> tuple[Path | None, str]:
    """(the browser, "") or (None, why it is missing and could not be installed)."""
    if CHROMIUM.exists():
        return CHROMIUM, ""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, (f"Debian's chromium is not installed at {CHROMIUM}, and it cannot be installed here "
                      "(apt-get install -y chromium needs root and apt-get)")
    install = ("install", "-y", "-q", "--no-install-recommends", "chromium")
    result = _apt_get(*install)
    if result.returncode != 0:  # a clean machine's package lists may be missing or stale
        _apt_get("update", "-q")
        result = _apt_get(*install)
    if result.returncode != 0 or not CHROMIUM.exists():
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"apt-get install chromium failed: {last[0]}"
    return CHROMIUM, ""
