"""A CPU target's peak memory: how far the process's resident memory rose after the reset.

The check runs in a process of its own: the resident set is the whole process's, and a test
session's threads (a server, a loader, the garbage collector) free memory while the check
allocates, which would hide part of the growth."""

import sys

import pytest
from child_commands import python_argv, run_child, trainspeed_env

pytestmark = pytest.mark.e2e

CHECK = """
import torch

from trainspeed.targets import get_target

MIB = 2**20
target = get_target("cpu:eager:fp32")
target.reset_peak_memory()
held = torch.ones(64 * MIB // 4)  # 64 MiB, every page written
grown = target.peak_memory_bytes()
assert grown is not None and grown >= 56 * MIB, grown
del held
target.reset_peak_memory()
assert target.peak_memory_bytes() < 56 * MIB  # a new window: the freed tensor is not its peak
assert target.row_fields() == {"peak_memory_source": "host RSS growth"}
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident-set high-water mark is read from /proc")
def test_a_cpu_target_measures_the_growth_of_its_resident_memory_since_its_reset():
    result = run_child(python_argv("-c", CHECK), env=trainspeed_env(), timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
