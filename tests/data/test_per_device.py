"""One loader per device (`PerDeviceLoader`): a process driving N devices reads each device's slice
of every batch with a loader of its own, and the N of them read together the samples one loader of
the process reads, batch by batch, over whole epochs and across a resume."""

from __future__ import annotations

import numpy as np
import pytest
from point_shards import POINT_BATCHES

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.data.loader import ShardLoader
from trainspeed.data.per_device import PerDeviceLoader, device_configs
from trainspeed.errors import UsageError

BATCH = 48


def per_device(folder, devices: int, **config) -> PerDeviceLoader:
    return PerDeviceLoader.open(LoaderConfig(**config), devices, lambda one: ShardLoader(folder, one, POINT_BATCHES))


def ids_of(batches) -> list[np.ndarray]:
    return [batch["meta_sample_id"].numpy() for batch in batches]


@pytest.mark.parametrize("devices, processes", [(4, 1), (3, 2)])
def test_the_loaders_of_a_process_s_devices_read_the_samples_of_its_one_loader(point_shards, devices: int,
                                                                                processes: int) -> None:
    """Two epochs at `processes` processes of `devices` devices, each device's loader with a worker
    of its own: every batch holds the samples the process's one loader reads, each device's part
    the contiguous slice of it that its device is handed."""
    for rank in range(processes):
        config = dict(batch_size=BATCH, rank=rank, world_size=processes, shuffle_buffer=300)
        one = ShardLoader(point_shards, LoaderConfig(num_workers=0, **config), POINT_BATCHES)
        loaders = per_device(point_shards, devices, num_workers=1, **config)
        assert isinstance(loaders, BatchLoader)
        assert len(loaders) == len(one) > 0 and loaders.num_samples == one.num_samples
        for epoch in range(2):
            one.set_epoch(epoch)
            loaders.set_epoch(epoch)
            read_once, read_per_device = ids_of(one), ids_of(loaders)
            assert len(read_per_device) == len(read_once)
            for once, parts in zip(read_once, read_per_device):
                assert np.array_equal(np.sort(parts), np.sort(once))
                for device, device_config in enumerate(device_configs(LoaderConfig(**config), devices)):
                    own = parts[device * device_config.batch_size:(device + 1) * device_config.batch_size]
                    assert np.all(np.diff(own) >= 0)  # each device's loader sweeps its slice forward


def test_a_resume_continues_every_device_s_loader_where_they_stood(point_shards) -> None:
    config = dict(batch_size=BATCH, num_workers=0, shuffle_buffer=300)
    whole = ids_of(per_device(point_shards, 2, **config))
    stopped = per_device(point_shards, 2, **config)
    for _, _ in zip(range(3), stopped):
        pass
    resumed = per_device(point_shards, 2, **config)
    resumed.load_state_dict(stopped.state_dict())
    one = ShardLoader(point_shards, LoaderConfig(**config), POINT_BATCHES)
    assert stopped.state_dict() == one.state_dict() | {"position": 3}  # as the process's one loader records it
    one.load_state_dict(stopped.state_dict())
    with pytest.raises(UsageError, match="loader state was saved with batch_size=48, this run uses 64"):
        per_device(point_shards, 2, **(config | {"batch_size": 64})).load_state_dict(stopped.state_dict())
    assert all(np.array_equal(found, expected) for found, expected in zip(ids_of(resumed), whole[3:]))
    assert len(ids_of(per_device(point_shards, 2, **config))) == len(whole)


def test_a_batch_the_devices_do_not_divide_is_refused() -> None:
    with pytest.raises(ValueError, match="a batch of 10 does not split over 4 devices"):
        device_configs(LoaderConfig(batch_size=10), 4)
