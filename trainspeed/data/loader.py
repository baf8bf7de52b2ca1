"""Per-rank batch loader over columnar shards: shard-local shuffling, batch-level gathers, resumable.

The workload describes its batches with a `ShardBatchSpec`: the shard schema, which stored columns
become batch tensors (and in which dtype), and the column whose value decides the train/val split.

The order of one epoch is `trainspeed.data.order.chunked_order` over the split's samples: global,
fixed by (seed, epoch), the same on every rank, and rank r reads the r-th contiguous slice of each
global batch (a run of neighbouring samples from one or two shards).

A batch is made by one `np.take` per shard segment and column, written straight into the output
tensor: no per-sample Python. Background workers (torch DataLoader, one whole batch per task) and
pinned memory overlap this with training; whether to pin is the caller's decision
(`LoaderConfig.pin_memory`: the trainer pins for CUDA targets). The split is by the split column:
a fixed hash of its value puts about `val_per_mille`/1000 of its distinct values (Mahjong: games)
in "val", so all samples of one value fall on the same side. Without a split column each sample is
its own group, hashed by its position in the shard set.

Every batch also holds `meta_sample_id` int64 (B,), each sample's position in the split (cheap; used
by the tests to prove exactly-once reading). A workload's step ignores keys it does not use.
"""

from __future__ import annotations

import functools
import os
import signal
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from trainspeed.child_start import child_context, starting
from trainspeed.data.base import Batch, BatchLoader, LoaderConfig
from trainspeed.data.order import (
    SAMPLE_ID_KEY,
    VAL_PER_MILLE,
    batches_per_epoch,
    check_rank_config,
    rank_slice,
)
from trainspeed.data.shards import ShardColumns, ShardSchema, open_shard, read_index
from trainspeed.data.split import SplitLayout, split_layout
from trainspeed.data.verify import index_problems, shard_file_problem
from trainspeed.errors import UsageError
from trainspeed.parent_death import die_with_owner


@dataclass(frozen=True)
class OutputColumn:
    """How one stored column becomes the batch tensor of the same name."""

    name: str
    dtype: torch.dtype
    """The tensor the gather fills. When it is the stored dtype, np.take writes straight into it;
    otherwise the rows go through a scratch array of the stored dtype and one casting copy (meant
    for small columns, e.g. a uint8 action id widened to int64)."""
    view_as: torch.dtype | None = None
    """Reinterpret the filled tensor as this dtype of the same item size on output (uint8 0/1 -> bool)."""


RowCheck = Callable[[Path, np.ndarray, Mapping[str, np.ndarray]], list[str]]
"""(shard file, the rows read from it, those rows of each output column in their stored dtype)
-> problems, each naming the file and a row, in the words `data verify` uses."""


@dataclass(frozen=True)
class ShardBatchSpec:
    """What a workload's batches are made of."""

    schema: ShardSchema
    outputs: tuple[OutputColumn, ...]
    split_column: str | None
    """An integer column; samples with equal values land in the same split. None: each sample
    on its own, by its position in the shard set."""
    val_per_mille: int = VAL_PER_MILLE
    check_rows: RowCheck | None = None
    """The workload's cheap checks of every batch read (Mahjong: action ids in range and legal under
    their mask), so data that would train to garbage is refused at its first read."""

    def __post_init__(self) -> None:
        split = [] if self.split_column is None else [self.split_column]
        for name in [o.name for o in self.outputs] + split:
            if name not in self.schema.columns:
                raise ValueError(f"column {name!r} is not in the {self.schema.format_name} schema")
        for output in self.outputs:
            if output.view_as is not None and output.view_as.itemsize != output.dtype.itemsize:
                raise ValueError(f"{output.name}: cannot view {output.dtype} as {output.view_as}")

    def stored_dtype(self, output: OutputColumn) -> np.dtype:
        return self.schema.columns[output.name][0]

    def writes_directly(self, output: OutputColumn) -> bool:
        """Whether np.take can write the stored column straight into the output tensor."""
        return torch.empty(0, dtype=output.dtype).numpy().dtype == self.stored_dtype(output)


@dataclass(frozen=True)
class BatchBuffers:
    """Output tensors of one batch, by batch key (outputs, then `meta_sample_id`); the gather writes
    into them in place."""

    tensors: dict[str, torch.Tensor]

    @staticmethod
    def allocate(spec: ShardBatchSpec, leading: tuple[int, ...], pin_memory: bool = False) -> "BatchBuffers":
        def empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.empty((*leading, *shape), dtype=dtype, pin_memory=pin_memory)
        tensors = {o.name: empty(spec.schema.columns[o.name][1], o.dtype) for o in spec.outputs}
        tensors[SAMPLE_ID_KEY] = empty((), torch.int64)
        return BatchBuffers(tensors)

    def slot(self, number: int, n: int) -> "BatchBuffers":
        """The first `n` rows of entry `number` of buffers allocated with a leading slot dimension."""
        return BatchBuffers({key: tensor[number, :n] for key, tensor in self.tensors.items()})

    def copy_from(self, other: "BatchBuffers") -> None:
        for key, tensor in self.tensors.items():
            tensor.copy_(other.tensors[key])

    def as_batch(self, spec: ShardBatchSpec) -> Batch:
        batch = {o.name: self.tensors[o.name] if o.view_as is None else self.tensors[o.name].view(o.view_as)
                 for o in spec.outputs}
        batch[SAMPLE_ID_KEY] = self.tensors[SAMPLE_ID_KEY]
        return batch


class SharedSlots:
    """A ring of batch buffers in shared memory, made before the workers fork.

    Handing a fresh tensor from a worker to the trainer costs a new shared-memory segment per batch;
    measured here that capped a 5 MB batch at ~100 batches/s whatever the worker count. Workers write
    into these fixed slots instead and send back only the slot number; the trainer's side copies the
    slot out (into pinned memory when asked), which frees it. A slot is reused only after
    `count` further batches were requested, and at most `workers * prefetch` are ever in flight.
    """

    def __init__(self, count: int, batch_size: int, spec: ShardBatchSpec) -> None:
        self.count = count
        self.buffers = BatchBuffers.allocate(spec, (count, batch_size))
        for tensor in self.buffers.tensors.values():
            tensor.share_memory_()

    def slot(self, number: int, n: int) -> BatchBuffers:
        return self.buffers.slot(number, n)


class ShardBatches(Dataset):
    """Map-style dataset whose item (epoch, batch number) is one whole batch of this rank.

    Without `slots` an item is the batch itself; with them it is (slot, size), the batch being
    in that shared slot.
    """

    def __init__(self, folder: Path, layout: SplitLayout, config: LoaderConfig, spec: ShardBatchSpec,
                 slots: SharedSlots | None = None) -> None:
        self.folder = folder
        self.layout = layout
        self.config = config
        self.spec = spec
        self.slots = slots
        self.checked = torch.zeros(len(layout.shard_infos), dtype=torch.uint8)
        """Shards whose bytes were checked in this run, shared by the workers (each is hashed once)."""
        if slots is not None:
            self.checked.share_memory_()
        self._cast = [o for o in spec.outputs if not spec.writes_directly(o)]  # gathered via scratch, then cast
        self._shards: list[ShardColumns] | None = None
        self._order_epoch: int | None = None
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return batches_per_epoch(self.layout.num_samples, self.config)

    def _open(self) -> list[ShardColumns]:
        if self._shards is None:
            self._shards = [open_shard(self.folder, info, self.spec.schema) for info in self.layout.shard_infos]
        return self._shards

    def order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            self._order, self._order_epoch = self.layout.epoch_order(self.config, epoch), epoch
        return self._order

    def ids(self, epoch: int, batch_number: int) -> np.ndarray:
        """Global sample ids of this rank's batch (sorted)."""
        return rank_slice(self.order(epoch), self.config, batch_number)

    def __getitem__(self, key: tuple[int, int]) -> Batch | tuple[int, int]:
        epoch, batch_number = key
        ids = self.ids(epoch, batch_number)
        if self.slots is None:
            out = BatchBuffers.allocate(self.spec, (len(ids),))
            self.gather(ids, out)
            return out.as_batch(self.spec)
        slot = batch_number % self.slots.count
        self.gather(ids, self.slots.slot(slot, len(ids)))
        return slot, len(ids)

    def gather(self, ids: np.ndarray, out: BatchBuffers) -> None:
        """Write the samples `ids` (sorted) into `out`: one np.take per shard segment and column."""
        shards = self._open()
        shard_ids = np.searchsorted(self.layout.shard_starts, ids, side="right") - 1
        rows = self.layout.rows[ids]
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(shard_ids)) + 1, [len(ids)]])
        targets = {o.name: out.tensors[o.name].numpy() for o in self.spec.outputs}
        scratch = {o.name: np.empty(targets[o.name].shape, self.spec.stored_dtype(o)) for o in self._cast}
        for begin, end in zip(cuts[:-1], cuts[1:]):
            if begin == end:
                continue
            number = int(shard_ids[begin])
            self._check_shard(number)
            shard, shard_rows = shards[number], rows[begin:end]
            for name, target in targets.items():
                np.take(shard[name], shard_rows, axis=0, out=scratch.get(name, target)[begin:end])
        self._check_rows(shard_ids, rows, cuts, {name: scratch.get(name, target) for name, target in targets.items()})
        for name, stored in scratch.items():
            targets[name][:] = stored
        out.tensors[SAMPLE_ID_KEY].numpy()[:] = ids


    def _check_shard(self, number: int) -> None:
        """Refuse a shard whose bytes are not the ones its index describes, at its first read."""
        if not self.config.check_data or self.checked[number]:
            return
        info = self.layout.shard_infos[number]
        problem = shard_file_problem(self.folder / info["file"], info, self.spec.schema, trust_unchanged=True)
        if problem is not None:
            raise UsageError(problem)
        self.checked[number] = 1

    def _check_rows(self, shard_ids: np.ndarray, rows: np.ndarray, cuts: np.ndarray,
                    columns: Mapping[str, np.ndarray]) -> None:
        """The workload's checks on the whole batch at once (one call is cheap; one per shard
        segment was not); only a batch with a problem is checked again per shard, to name it."""
        if not self.config.check_data or self.spec.check_rows is None:
            return
        if not self.spec.check_rows(self.folder, rows, columns):
            return
        for begin, end in zip(cuts[:-1], cuts[1:]):
            path = self.folder / self.layout.shard_infos[int(shard_ids[begin])]["file"]
            problems = self.spec.check_rows(path, rows[begin:end], {name: a[begin:end] for name, a in columns.items()})
            if problems:
                raise UsageError(problems[0])


def one_line_worker_error(error: UsageError) -> UsageError:
    """A DataLoader worker's error arrives with its traceback glued on; keep our one line."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    last = lines[-1] if lines else str(error)
    return UsageError(last.split("UsageError: ", 1)[-1])


class PositionSampler(Sampler):
    """Yields (epoch, batch number) from the loader's current position to the epoch's end (of any
    loader with `epoch`, `position` and `len`: the shard loader, `trainspeed.data.samples`).

    It holds its loader weakly: a reference cycle (loader -> DataLoader -> sampler -> loader) would
    leave the loader to the garbage collector, which could then run the DataLoader's shutdown in a
    forked worker of another loader, where it must not."""

    def __init__(self, loader: "ShardLoader | BatchLoader") -> None:
        self._loader = weakref.ref(loader)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        loader = self._loader()
        return iter([(loader.epoch, t) for t in range(loader.position, len(loader))])

    def __len__(self) -> int:
        loader = self._loader()
        return len(loader) - loader.position


WORKER_PRELOAD = ("torch", "trainspeed.data.loader", "trainspeed.data.samples")
"""What a fork server imports once for the loaders' workers it forks (`trainspeed.child_start`)."""


def worker_batches(dataloader: DataLoader) -> Iterator:
    """`iter(dataloader)`; the first time, its persistent workers start by the method safe then
    (`child_start.child_context`). A fork where it is safe, whatever the process's default:
    workers start in milliseconds (a process that was itself spawned defaults to spawn, measured at
    ~8 s per worker start). Once JAX has started in this process a fork could deadlock a worker,
    and they come from a fork server. Chosen when the workers start, not when the loader is made:
    a run builds its model, which may start JAX, in between."""
    if dataloader.num_workers == 0 or getattr(dataloader, "_iterator", None) is not None:  # none, or they run
        return iter(dataloader)
    context = child_context(WORKER_PRELOAD)
    dataloader.multiprocessing_context = context
    init = dataloader.worker_init_fn
    if context.get_start_method() != "fork" and not (isinstance(init, functools.partial) and init.func is _owned_worker):
        # the workers' parent is then the fork server, whose end they would not see (torch's own
        # watch looks at their parent): they watch this process
        dataloader.worker_init_fn = functools.partial(_owned_worker, os.getpid(), init)
    with starting(context):
        return iter(dataloader)


def _owned_worker(owner_pid: int, init: Callable[[int], None] | None, worker_id: int) -> None:
    """A worker's set-up where a fork server started it: it ends when the loader's process does."""
    die_with_owner(owner_pid)
    if init is not None:
        init(worker_id)


def worker_seed_generator(config: LoaderConfig) -> torch.Generator:
    """The generator a DataLoader draws its workers' base seed from, once per new iterator.

    Without one the DataLoader draws from the global torch generator, which the training step uses
    too: a resumed run opens an iterator mid-epoch, where the run it continues opened none, so it
    drew one number more and every random number after it (StyleGAN3's latents and noise) differed.
    With a generator of the loader's own the global one is the training step's alone. These workers
    draw no random numbers, so their seeds need no checkpoint."""
    return torch.Generator().manual_seed(config.seed * 1_000_003 + config.rank)


def leave_interrupts_to_the_trainer(worker_id: int) -> None:
    """A loader worker ignores SIGINT: a Ctrl-C reaches the whole process group, and the process the
    worker serves answers it (the trainer checkpoints, then shuts its workers down). A worker that
    exited on its own KeyboardInterrupt would leave that process waiting for a batch that never comes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def single_thread_worker(worker_id: int) -> None:
    leave_interrupts_to_the_trainer(worker_id)
    torch.set_num_threads(1)


class ResumablePosition:
    """The position of a rank's loader in its epoch order, which a checkpoint carries: the epoch
    and the batches read of it, with the settings that order depends on, refused on resume where
    they differ (another seed, world size or batch would read other samples)."""

    config: LoaderConfig
    epoch: int
    position: int

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = int(epoch), 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "seed": self.config.seed,
                "world_size": self.config.world_size, "batch_size": self.config.batch_size}

    def load_state_dict(self, state: dict) -> None:
        check_same_order(state, self.config)
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def check_same_order(state: dict, config: LoaderConfig) -> None:
    """UsageError where a loader position `state` was saved under another seed, world size or batch
    than `config`'s: it would read other samples."""
    for key in ("seed", "world_size", "batch_size"):
        if key in state and state[key] != getattr(config, key):
            raise UsageError(f"loader state was saved with {key}={state[key]}, this run uses "
                             f"{getattr(config, key)}: resume with the same setting")


class ShardLoader(ResumablePosition, BatchLoader):
    """The BatchLoader of one rank over a shard folder (see the module docstring for the order)."""

    def __init__(self, folder: Path, config: LoaderConfig, spec: ShardBatchSpec) -> None:
        check_rank_config(config)
        index = read_index(folder, spec.schema)
        problems = index_problems(Path(folder), index, spec.schema)
        if problems:  # the index check `data verify` runs: a set it refuses never trains
            raise UsageError(problems[0])
        self.config = config
        self.spec = spec
        self.folder = Path(folder)
        self.data_format = index["format"]
        self.layout = split_layout(folder, index, config.split, spec.schema, spec.split_column, spec.val_per_mille)
        self.epoch = 0
        self.position = 0
        workers = config.num_workers
        prefetch = max(1, config.prefetch_batches)
        slots = SharedSlots(workers * prefetch + 2, config.batch_size, spec) if workers > 0 else None
        self.dataset = ShardBatches(folder, self.layout, config, spec, slots)
        # Workers persist across epochs: forking them anew each epoch cost a small dataset (a few
        # steps per epoch) its start-up every few steps. Each worker computes a new epoch's order.
        self._dataloader = DataLoader(
            self.dataset, batch_size=None, sampler=PositionSampler(self), num_workers=workers,
            prefetch_factor=prefetch if workers > 0 else None, persistent_workers=workers > 0,
            worker_init_fn=single_thread_worker if workers > 0 else None, generator=worker_seed_generator(config))

    @property
    def num_samples(self) -> int:
        return self.layout.num_samples

    def __len__(self) -> int:
        return batches_per_epoch(self.layout.num_samples, self.config)

    def _allocate(self, size: int) -> BatchBuffers:
        return BatchBuffers.allocate(self.spec, (size,), self.config.pin_memory)

    def __iter__(self) -> Iterator[Batch]:
        if self.position >= len(self):
            return
        if self.config.num_workers == 0:
            yield from self._iter_in_process()
            return
        # With persistent workers a new iteration first drains what the last one left in flight
        # (a consumer that stopped early), so no slot is written while it is read.
        batches = worker_batches(self._dataloader)
        while True:
            try:
                slot, size = next(batches)
            except StopIteration:
                return
            except UsageError as error:  # damaged data, found by a worker
                raise one_line_worker_error(error) from None
            out = self._allocate(size)
            out.copy_from(self.dataset.slots.slot(slot, size))
            self.position += 1
            yield out.as_batch(self.spec)

    def _iter_in_process(self) -> Iterator[Batch]:
        while self.position < len(self):
            ids = self.dataset.ids(self.epoch, self.position)
            out = self._allocate(len(ids))
            self.dataset.gather(ids, out)
            self.position += 1
            yield out.as_batch(self.spec)

    def data_record(self) -> dict:
        """What this loader reads, for the run's summary: the shard set's format, its shard files,
        and a fingerprint over the checksums its index records for them (the content, cheaply)."""
        return self.layout.data_record(self.folder, self.data_format)
