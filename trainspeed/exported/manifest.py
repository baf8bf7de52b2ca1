"""The manifest of an exported step folder: what was exported, for which platform, with what.

A folder is data, never code: the manifest is JSON read into typed fields, the arrays are npz read
without pickle, and the programs are `jax.export` artifacts (serialized StableHLO, which JAX
deserializes without running Python from the file). Every file the manifest names carries its size
and sha256, checked before it is used (`trainspeed.exported.folder`), so a cut or altered file is
one line, not a crash on the device.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from trainspeed.errors import UsageError

FORMAT = "trainspeed-exported-step"
FORMAT_VERSION = 2
"""2: the manifest declares every file's size (`Manifest.file_bytes`), checked before it is read."""
MANIFEST = "manifest.json"
STATE_FILE = "state.npz"
BATCH_FILE = "batch.npz"
MAX_MANIFEST_BYTES = 16 << 20


@dataclass(frozen=True)
class Column:
    """One column of the step's batch: its name, dtype and the shape of one sample."""

    name: str
    dtype: str
    sample_shape: list[int]


LEAF_SOURCES = ("file", "zeros", "constant", "normal")
INITIAL_STATES = ("file", "drawn")
"""`export --initial-state`: every parameter in state.npz, or the large ones drawn on the device."""


@dataclass(frozen=True)
class Leaf:
    """One leaf of the step's state, in the order the programs take them, and where its initial
    value comes from: `file` (state.npz), `zeros` (an optimizer's fresh moments and counters),
    `constant` (every element `mean`), or `normal` (drawn on the device with the leaf's mean and
    standard deviation: `export --initial-state drawn`, for models whose weights would not travel)."""

    name: str
    shape: list[int]
    dtype: str
    source: str = "file"
    mean: float | None = None
    std: float | None = None


@dataclass(frozen=True)
class PhaseProgram:
    """The training step of one list of phases (`Manifest.step_phases`) at one batch size."""

    phases: str
    train_file: str
    train_sha256: str


@dataclass(frozen=True)
class SlicedProgram:
    """The training step over `parts` equal slices of the batch that the noise-scale meter reads
    (`export --noise-scale-micro-batches`): each slice's gradient, then one update on their mean,
    as the jax family's step in slices (`FunctionalStep.train_in_slices`). It takes the plain
    step's inputs and a permutation of the batch's samples (int32; the slices are cut from the
    batch in that order), and returns the new state, the loss, then per network of `networks` the
    mean over slices of its gradient's squared norm, then per network that of the mean gradient."""

    parts: int
    networks: list[str]
    train_file: str
    train_sha256: str


@dataclass(frozen=True)
class Program:
    """The programs of one batch size: training step, and validation sums where the workload has
    them. A phased workload's steps have one training program per list of phases (`phase_programs`);
    `train_file` is then the one most of its steps run."""

    batch_size: int
    train_file: str
    train_sha256: str
    eval_file: str | None = None
    eval_sha256: str | None = None
    phase_programs: list[PhaseProgram] = dataclasses.field(default_factory=list)
    sliced: SlicedProgram | None = None
    """The step in slices the noise-scale meter reads (None: exported without one)."""
    micro_batches: int = 1
    """The training programs accumulate their gradient over this many equal slices of the batch
    (`export --micro-batch-size`), so a batch larger than the device's memory holds trains."""

    def train_files(self) -> list[tuple[str, str]]:
        """Every training program's file and sha256, each once (`train_file` is also one of the
        phases'), the step in slices last."""
        files = [(self.train_file, self.train_sha256)] + [(phase.train_file, phase.train_sha256)
                                                          for phase in self.phase_programs]
        if self.sliced is not None:
            files.append((self.sliced.train_file, self.sliced.train_sha256))
        return list(dict.fromkeys(files))

    def train_file_of(self, phases: str | None) -> tuple[str, str]:
        """The file and sha256 of the program of `phases` (None: a step of one backward())."""
        if phases is None:
            return self.train_file, self.train_sha256
        for phase in self.phase_programs:
            if phase.phases == phases:
                return phase.train_file, phase.train_sha256
        raise UsageError(f"batch size {self.batch_size}: no program of the phases {phases!r} was exported; "
                         "export the step again")


@dataclass(frozen=True)
class OptimizerGroup:
    """One param group of the workload's own optimizer, as exported: the learning rate the
    programs get as an input, and the hyperparameters compiled into them."""

    optimizer: str
    kind: str
    lr: float
    hyperparameters: dict[str, Any]


EVAL_FORMULAS = ("value", "ratio", "max_ratio")


@dataclass(frozen=True)
class EvalFormula:
    """How one validation metric follows from the eval program's sums (summed over batches), found
    at export by trying the workload's own `summarize_eval` (`value`: a scalar sum as it is;
    `ratio`: one scalar sum over another; `max_ratio`: the largest entry of a vector sum over a
    scalar one). A machine with JAX only cannot run the workload's Python, so it reads these."""

    metric: str
    formula: str
    of: str
    per: str | None = None

    def value(self, totals: dict[str, Any]) -> float:
        import numpy as np

        top = np.asarray(totals[self.of], dtype=np.float64)
        top_value = float(top.max()) if self.formula == "max_ratio" else float(top)
        if self.formula == "value":
            return top_value
        per = float(np.asarray(totals[self.per], dtype=np.float64))
        return top_value / per if per else float("nan")


@dataclass(frozen=True)
class DataSplit:
    """How the workload splits a shard set into train and val (`trainspeed.data.order`): by a hash
    of an integer column (None: of each sample's position), `val_per_mille` of it in val. A
    dataset whose index records its own split is read by that instead."""

    column: str | None
    val_per_mille: int


@dataclass(frozen=True)
class Manifest:
    format: str
    format_version: int
    workload: str
    workload_module: str
    workload_sha256: str
    workload_version: str | None
    size: str
    target: str
    precision: str
    platforms: list[str]
    flops_per_sample: float
    columns: list[Column]
    state: list[Leaf]
    programs: list[Program]
    optimizer_groups: list[OptimizerGroup]
    lr_reference_batch: int | None
    eval_metrics: list[str]
    batch_rows: int
    """Samples in the exported synthetic batch (batch.npz); each batch size reads its first rows."""
    state_sha256: str
    batch_sha256: str
    file_bytes: dict[str, int]
    """The size of every file the manifest names, checked before the file is read (a file of
    another size is cut, grown or not the one exported, and a sparse file of 64 GiB is never read
    to be hashed)."""
    jax_version: str
    """The exact JAX that serialized the programs; another refuses them (`check_runtime`)."""
    versions: dict[str, str]
    seed: int
    initial_state: str = "file"
    """"file": every parameter as built (state.npz); "drawn": large parameters drawn on the device
    with their mean and standard deviation, the rest from the file."""
    command: str | None = None
    eval_summary: list[EvalFormula] = dataclasses.field(default_factory=list)
    """The validation metrics `train --exported` reports, each from the eval sums; a metric the
    workload computes some other way is not among them (exported before: none)."""
    data_split: DataSplit | None = None
    """The workload's split of its shard sets (None: it declares none; a dataset whose index
    records a split needs none)."""
    step_phases: list[str] = dataclasses.field(default_factory=list)
    """A phased workload's steps (`trainspeed.workloads.phases`): the phases of steps 0, 1, 2, ...,
    repeating with this list's length, each the name of a program in `Program.phase_programs`
    (StyleGAN3: "G+D+R1" then fifteen "G+D"). Empty: every step runs `train_file`."""
    devices: int | None = None
    """`export --devices N`: every program was traced for a mesh of N devices, each batch split over
    its `data` axis and the state copied to every device (data parallel, XLA's all-reduce in the
    program); the host that runs it needs N devices. None: a program of one device, with no mesh
    (exported before: all)."""

    @property
    def program_devices(self) -> int:
        """The devices every program takes (1 where it was exported with no mesh)."""
        return self.devices or 1

    def phases_of_step(self, step: int) -> str | None:
        """The phases step number `step` runs (None: a step of one backward())."""
        return self.step_phases[step % len(self.step_phases)] if self.step_phases else None

    def program(self, batch_size: int) -> Program:
        for program in self.programs:
            if program.batch_size == batch_size:
                return program
        sizes = ",".join(str(p.batch_size) for p in self.programs)
        raise UsageError(f"batch size {batch_size} was not exported; this folder has {sizes} "
                         "(export it again with --batch-sizes to add it)")

    @property
    def batch_sizes(self) -> list[int]:
        return [program.batch_size for program in self.programs]

    def named_files(self) -> dict[str, str]:
        """Every file the manifest names, with its sha256: the state, the batch, each program."""
        files = {STATE_FILE: self.state_sha256, BATCH_FILE: self.batch_sha256}
        for program in self.programs:
            files.update(program.train_files())
            if program.eval_file is not None and program.eval_sha256 is not None:
                files[program.eval_file] = program.eval_sha256
        return files

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
