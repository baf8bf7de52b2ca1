"""A CPU target's peak memory: how far the process's resident memory rose after the reset."""

import sys

import pytest
import torch

from trainspeed.targets import get_target

MIB = 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident-set high-water mark is read from /proc")
def test_a_cpu_target_measures_the_growth_of_its_resident_memory_since_its_reset():
    target = get_target("cpu:eager:fp32")
    target.reset_peak_memory()
    held = torch.ones(64 * MIB // 4)  # 64 MiB, every page written
    grown = target.peak_memory_bytes()
    assert grown is not None and grown >= 56 * MIB
    del held
    target.reset_peak_memory()
    assert target.peak_memory_bytes() < 56 * MIB  # a new window: the freed tensor is not its peak
    assert target.row_fields() == {"peak_memory_source": "host RSS growth"}
