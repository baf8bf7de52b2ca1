"""The loader of one rank over data read where it lies (`trainspeed.data.sources`): an image
folder, a token file, a Hugging Face dataset, WebDataset tar shards.

A format gives a `SampleReader`: how many samples its split has, what a batch holds (`layout`),
and how to read sample i of an epoch into its row of the batch (or a whole batch at once, for a
token file). The loader adds what every format shares, as the shard loader does for shards:

  * the order of `trainspeed.data.order`: one permutation per epoch fixed by (seed, epoch), the
    same for any number of ranks; rank r reads the r-th slice of each global batch, nothing else
    (sorted within the slice, so a memory map or a tar is read forward);
  * the position (epoch, batches read) in `state_dict`, so a run killed with kill -9 continues from
    its checkpoint exactly (augmentation draws from (seed, epoch, sample), never from a worker);
  * decoding on the rank's own workers (forked once, persistent), each batch one task;
  * bad samples (`BadSample`: a corrupt or truncated image) refused in one line, or, with
    `LoaderConfig.bad_samples = "skip"`, skipped: the next readable sample of the split takes its
    place (as timm's loader does), so batches keep their size and the order stays fixed; each skip
    is counted (`data_record()["skipped"]`, the run's summary) and warned about on stderr.

Nothing is held but the batches in flight: readers keep their index (paths, offsets) as numpy
arrays and memory maps, and read a sample when its batch is made.
"""

from __future__ import annotations

import sys
from typing import Iterator, Protocol

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from trainspeed.data.base import Batch, LoaderConfig
from trainspeed.data.decode import BadSample
from trainspeed.data.loader import (
    PositionSampler,
    ResumablePosition,
    one_line_worker_error,
    single_thread_worker,
    worker_batches,
    worker_seed_generator,
)
from trainspeed.data.order import SAMPLE_ID_KEY, SPLITS, batches_per_epoch, check_rank_config, rank_slice, shuffled_order
from trainspeed.data.sources import DataSource
from trainspeed.errors import UsageError

BAD_SAMPLES = ("refuse", "skip")
MAX_SUBSTITUTES = 64
"""Unreadable samples in a row that a skip passes over before it refuses (a folder of junk)."""
MAX_WARNINGS = 20
"""Skipped samples named on stderr by one loader; further ones are counted only."""

SampleLayout = dict[str, tuple[np.dtype, tuple[int, ...]]]


class SampleReader(Protocol):
    """One split of a dataset, read a sample (or a batch) at a time; picklable (workers get a copy)."""

    source: DataSource
    layout: SampleLayout

    def __len__(self) -> int: ...

    def read(self, index: int, epoch: int, row: dict[str, np.ndarray]) -> None:
        """Write sample `index` (of epoch `epoch`: its augmentation) into `row`; BadSample if it cannot."""
        ...


class EpochOrder(Protocol):
    def epoch_order(self, config: LoaderConfig, epoch: int) -> np.ndarray: ...


def refused(bad: BadSample) -> UsageError:
    return UsageError(f"{bad}; remove or replace it, or train with --bad-samples skip to count and skip such files")


def fill_batch(reader: SampleReader, ids: np.ndarray, epoch: int, out: dict[str, np.ndarray],
               bad_samples: str) -> list[str]:
    """Read the samples `ids` into `out` (one row each); returns the bad samples skipped, each as
    `name: reason`. A reader with `read_batch` reads them all at once."""
    read_batch = getattr(reader, "read_batch", None)
    if read_batch is not None:
        read_batch(ids, epoch, out)
        return []
    skipped: list[str] = []
    total = len(reader)
    for row, index in enumerate(ids):
        candidate = int(index)
        for _ in range(MAX_SUBSTITUTES):
            try:
                reader.read(candidate, epoch, {key: array[row, ...] for key, array in out.items()})
                break
            except BadSample as bad:
                if bad_samples != "skip":
                    raise refused(bad) from None
                skipped.append(str(bad))
                candidate = (candidate + 1) % total
        else:
            raise UsageError(f"{MAX_SUBSTITUTES} unreadable samples in a row, the first {skipped[-MAX_SUBSTITUTES]}; "
                             "`trainspeed data verify` lists every one")
    return skipped


class SampleBatches(Dataset):
    """Map-style dataset whose item (epoch, batch number) is one whole batch of this rank, with
    the bad samples it skipped."""

    def __init__(self, reader: SampleReader, config: LoaderConfig) -> None:
        self.reader = reader
        self.config = config
        self._order_epoch: int | None = None
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return batches_per_epoch(len(self.reader), self.config)

    def order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            own = getattr(self.reader, "epoch_order", None)
            order = own(self.config, epoch) if own is not None else shuffled_order(len(self.reader), self.config, epoch)
            self._order, self._order_epoch = order, epoch
        return self._order

    def ids(self, epoch: int, batch_number: int) -> np.ndarray:
        return np.sort(rank_slice(self.order(epoch), self.config, batch_number))

    def __getitem__(self, key: tuple[int, int]) -> tuple[Batch, list[str]]:
        epoch, batch_number = key
        ids = self.ids(epoch, batch_number)
        out = {name: np.empty((len(ids), *shape), dtype) for name, (dtype, shape) in self.reader.layout.items()}
        skipped = fill_batch(self.reader, ids, epoch, out, self.config.bad_samples)
        batch = {name: torch.from_numpy(array) for name, array in out.items()}
        batch[SAMPLE_ID_KEY] = torch.from_numpy(ids.astype(np.int64))
        return batch, skipped


class SampleLoader(ResumablePosition):
    """The BatchLoader of one rank over a `SampleReader` (module docstring)."""

    def __init__(self, reader: SampleReader, config: LoaderConfig) -> None:
        check_rank_config(config)
        if config.split not in SPLITS:
            raise UsageError(f"split {config.split!r}: use one of {', '.join(SPLITS)}")
        if config.bad_samples not in BAD_SAMPLES:
            raise UsageError(f"bad samples {config.bad_samples!r}: use one of {', '.join(BAD_SAMPLES)}")
        self.reader = reader
        self.config = config
        self.epoch = 0
        self.position = 0
        self.skipped = 0
        self.dataset = SampleBatches(reader, config)
        workers = config.num_workers
        self._dataloader = DataLoader(
            self.dataset, batch_size=None, sampler=PositionSampler(self), num_workers=workers,
            prefetch_factor=max(1, config.prefetch_batches) if workers > 0 else None, persistent_workers=workers > 0,
            worker_init_fn=single_thread_worker if workers > 0 else None, generator=worker_seed_generator(config),
            pin_memory=config.pin_memory)

    @property
    def num_samples(self) -> int:
        return len(self.reader)

    def __len__(self) -> int:
        return batches_per_epoch(len(self.reader), self.config)

    def __iter__(self) -> Iterator[Batch]:
        if self.position >= len(self):
            return
        # With persistent workers a new iteration first drains what the last one left in flight.
        batches = worker_batches(self._dataloader)
        while True:
            try:
                batch, skipped = next(batches)
            except StopIteration:
                return
            except UsageError as error:  # a refused sample or damaged data, found by a worker
                raise one_line_worker_error(error) from None
            self._count(skipped)
            self.position += 1
            yield batch

    def _count(self, skipped: list[str]) -> None:
        for problem in skipped:
            self.skipped += 1
            if self.skipped <= MAX_WARNINGS:
                more = "; further skipped samples are counted only" if self.skipped == MAX_WARNINGS else ""
                print(f"trainspeed: warning: {problem}; skipped (--bad-samples skip), the next readable sample "
                      f"takes its place{more}", file=sys.stderr, flush=True)

    def data_record(self) -> dict:
        """What this loader read, for the run's summary: format, files, fingerprint, samples skipped."""
        return self.reader.source.as_record(self.skipped)
