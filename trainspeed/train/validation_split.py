"""A run that needs validation refuses data whose validation split is empty, before it trains.

A small dataset can hold no validation sample after its split (16 images of which the 5% held out
by a hash of each path is none; 20 Mahjong games, none of which falls in the held-out share; an
empty val.bin). A run validating only where it can would then train its whole budget and never
validate: `--until ... --stop-at-target` never learns that its goal is met or missed, and a
critical-batch study trains every branch before it finds that none has the metric it compares.
So whatever needs a validation metric asks here first, and gets one line before anything trains.
"""

from __future__ import annotations

from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.train.config import TrainConfig
from trainspeed.workloads.base import Workload

SPLIT_HELP = ("give more data, or a validation split of its own (an image folder's val/ tree, a val.bin, val-*.tar "
              "shards, a dataset's validation split)")


def validation_samples(config: TrainConfig, workload: Workload) -> int:
    """The samples of the validation split of the run's `--data`, as its ranks will open it."""
    probe = LoaderConfig(batch_size=1, world_size=config.world_size, split="val", shuffle=False, drop_last=False,
                         num_workers=0, bad_samples=config.bad_samples)
    return workload.open_dataset(config.data, config.size, probe).num_samples  # type: ignore[attr-defined]


def check_validation_split(config: TrainConfig, workload: Workload, reason: str) -> None:
    """UsageError where the split holds no sample, its line starting with why validation is needed
    (`reason`: "train: --until val/accuracy>=0.9 needs validation")."""
    if config.data is None:
        return
    if validation_samples(config, workload) == 0:
        raise UsageError(f"{reason}, and the validation split of --data {config.data} holds no sample (too little "
                         f"data for one after its split); {SPLIT_HELP}")
