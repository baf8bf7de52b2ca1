"""A BatchLoader whose batches pass through a function: a workload's own conversion of what its
shards store (uint8 token bytes to int32 ids, labels checked against its classes) into the layout
of its synthetic batches, without a loader of its own."""

from __future__ import annotations

from typing import Callable, Iterator

from trainspeed.data.base import Batch, BatchLoader


class MappedLoader:
    def __init__(self, loader: BatchLoader, convert: Callable[[Batch], Batch]) -> None:
        self.loader = loader
        self.convert = convert

    def __iter__(self) -> Iterator[Batch]:
        return (self.convert(batch) for batch in self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    @property
    def num_samples(self) -> int:
        return self.loader.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)

    def state_dict(self) -> dict:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.loader.load_state_dict(state)

    def data_record(self) -> dict | None:
        """What the loader it maps read (`trainspeed.data.sources.DataSource`), where it says."""
        record = getattr(self.loader, "data_record", None)
        return record() if record is not None else None
