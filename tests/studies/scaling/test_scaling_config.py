"""The scaling study's rank counts: processes for a target of one process per device (at most the
CPUs), devices for a target that drives them from one process (xla:*, jax:*)."""

from __future__ import annotations

import pytest

from trainspeed.errors import UsageError
from trainspeed.flags import machine_cpus
from trainspeed.studies.scaling.config import ScalingConfig
from trainspeed.studies.scaling.study import check_processes


def config(target: str, ranks: tuple[int, ...]) -> ScalingConfig:
    return ScalingConfig(out="out", data="data", target=target, ranks=ranks, batch_sizes=(32,), steps=4, repeats=1, timing_warmup_steps=1)


def test_more_ranks_than_cpus_are_refused_for_a_target_of_one_process_per_device() -> None:
    with pytest.raises(UsageError, match="more processes than this machine's"):
        check_processes(config("cpu:eager:fp32", (1, machine_cpus() + 1)))


@pytest.mark.parametrize("target", ["jax:jit:fp32", "xla:lazy:fp32"])
def test_a_target_that_drives_its_devices_from_one_process_counts_devices(target: str) -> None:
    check_processes(config(target, (1, 2, 4, 8, machine_cpus() + 1)))
