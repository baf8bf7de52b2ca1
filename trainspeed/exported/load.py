"""An exported step folder, loaded where only JAX and numpy are: the checked manifest, the initial
state and batch (npz, no pickle, each array's header checked against the manifest before it is
read), and the programs, deserialized, checked against the manifest (`signatures`) and compiled
per batch size on first use (their compile seconds counted apart from the steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed import jaxrt
from trainspeed.errors import UsageError
from trainspeed.exported.folder import check_runtime, read_checked, read_manifest
from trainspeed.exported.manifest import BATCH_FILE, STATE_FILE, Manifest, SlicedProgram
from trainspeed.exported.npz_arrays import Expected, read_npz
from trainspeed.exported.signatures import EVAL, SLICED, TRAIN, check_signature
from trainspeed.exported.stored_arrays import leaf_key, restored, stored_dtype
from trainspeed.jaxrt.placement import Placement, data_parallel, one_device, start_devices

EXPORT_AGAIN = "export the step again"


def _placement(manifest: Manifest, folder: Path) -> Placement:
    """One device, or a mesh of the manifest's devices: on a CPU, JAX is asked for that many host
    devices before it starts; a host with fewer is one line."""
    if manifest.devices is None:
        return one_device()
    try:
        start_devices(manifest.devices)
        return data_parallel(manifest.devices)
    except UsageError:
        import jax

        found = len(jax.local_devices())
        raise UsageError(f"--exported {folder}: its programs run over {manifest.devices} devices (export --devices "
                         f"{manifest.devices}), and JAX sees {found} here; run it on a host with "
                         f"{manifest.devices}, or export it again with --devices {found}") from None


@dataclass
class ExportedSteps:
    """One exported folder, ready to step on this machine's JAX device."""

    folder: Path
    manifest: Manifest
    programs: dict[tuple[str, int, str | None], Any] = field(default_factory=dict)
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The npz files read so far (every configuration starts from the same state and batch)."""
    deserialized: dict[str, Any] = field(default_factory=dict)
    """The artifacts read and checked so far, by file name."""
    placement: Placement = field(default_factory=one_device)
    """This machine's device, or a mesh of the folder's devices (`export --devices N`)."""

    @classmethod
    def open(cls, folder: Path, workload: str | None = None) -> "ExportedSteps":
        import jax

        manifest = read_manifest(folder)
        placement = _placement(manifest, folder)
        check_runtime(manifest, folder, jax.__version__, jaxrt.device().platform, workload)
        return cls(folder, manifest, placement=placement)

    def on_devices(self, columns: list[Any]) -> list[Any]:
        """A batch's host columns on the device, or split over the mesh's devices (each its slice)."""
        placed = self.placement.put_batch(dict(enumerate(columns)))
        return [placed[index] for index in range(len(columns))]

    def file(self, name: str, sha256: str) -> bytes:
        """A file the manifest names, its size and sha256 checked (`read_checked`)."""
        size = self.manifest.file_bytes.get(name)
        if size is None:
            raise UsageError(f"--exported {self.folder}: the manifest gives no size for {name}; {EXPORT_AGAIN}")
        return read_checked(self.folder, name, sha256, size)

    def initial_arrays(self) -> dict[int, Any]:
        """The leaves state.npz holds, by their index in the state, on the host: each array's
        header checked against the manifest's leaf before it is read."""
        stored = {index: leaf for index, leaf in enumerate(self.manifest.state) if leaf.source == "file"}
        if not stored:
            return {}
        if STATE_FILE not in self.read:
            expected = {leaf_key(index): Expected(stored_dtype(leaf.dtype), tuple(leaf.shape))
                        for index, leaf in stored.items()}
            self.read[STATE_FILE] = read_npz(self.file(STATE_FILE, self.manifest.state_sha256), expected,
                                             f"--exported {self.folder}/{STATE_FILE}", EXPORT_AGAIN)
        arrays = self.read[STATE_FILE]
        return {index: restored(arrays[leaf_key(index)], leaf.dtype) for index, leaf in stored.items()}

    def initial_state(self) -> list[Any]:
        """The state's leaves in the programs' order, on the device: read from state.npz (checked
        against the manifest), or made there as the manifest says (zeros, a constant, a draw)."""
        import jax
        import jax.numpy as jnp

        arrays = self.initial_arrays()
        key = jax.random.PRNGKey(self.manifest.seed)
        leaves = []
        for index, leaf in enumerate(self.manifest.state):
            if leaf.source == "file":
                leaves.append(arrays[index])
                continue
            with jax.default_device(jaxrt.device()):
                if leaf.source == "zeros":
                    value = jnp.zeros(leaf.shape, leaf.dtype)
                elif leaf.source == "constant":
                    value = jnp.full(leaf.shape, leaf.mean, leaf.dtype)
                else:
                    draw = jax.random.normal(jax.random.fold_in(key, index), leaf.shape, jnp.float32)
                    value = (draw * leaf.std + leaf.mean).astype(leaf.dtype)
            leaves.append(value)
        return self.placement.put_state(leaves)

    def stored_batch(self) -> list[Any]:
        """The columns batch.npz holds (`batch_rows` samples), on the host, in column order: each
        array's header checked against the manifest's column before it is read."""
        if BATCH_FILE not in self.read:
            expected = {column.name: Expected(stored_dtype(column.dtype), (self.manifest.batch_rows,
                                                                          *column.sample_shape))
                        for column in self.manifest.columns}
            self.read[BATCH_FILE] = read_npz(self.file(BATCH_FILE, self.manifest.batch_sha256), expected,
                                             f"--exported {self.folder}/{BATCH_FILE}", EXPORT_AGAIN)
        return [restored(self.read[BATCH_FILE][column.name], column.dtype) for column in self.manifest.columns]

    def host_batch(self, batch_size: int) -> list[Any]:
        """The exported synthetic batch's first `batch_size` samples, as host arrays in column order;
        a batch size above the samples it holds (`export --batch-rows`) repeats them in order."""
        import numpy as np

        columns = []
        for array in self.stored_batch():
            repeats = -(-batch_size // len(array))
            columns.append((np.concatenate([array] * repeats) if repeats > 1 else array)[:batch_size])
        return columns

    def verify(self, batch_sizes: list[int], state_and_batch: bool = True) -> None:
        """Every file these batch sizes will read has the manifest's size and sha256 and holds what
        the manifest says: the arrays of state.npz and batch.npz (unless `state_and_batch` is
        False: a run reads no synthetic batch), and programs that take and return what the manifest
        says. A cut, changed or edited folder is one line before any size is measured or anything
        is written, not an error after the sizes before it."""
        if state_and_batch:
            self.initial_arrays()
            self.stored_batch()
        for batch_size in batch_sizes:
            program = self.manifest.program(batch_size)
            sliced = program.sliced
            for name, sha256 in program.train_files():
                if sliced is not None and name == sliced.train_file:
                    self._exported(name, sha256, SLICED, batch_size, len(sliced.networks))
                else:
                    self._exported(name, sha256, TRAIN, batch_size)
            if program.eval_file is not None and program.eval_sha256 is not None:
                self._exported(program.eval_file, program.eval_sha256, EVAL, batch_size)

    def learning_rates(self) -> Any:
        import jax.numpy as jnp

        return jnp.asarray([group.lr for group in self.manifest.optimizer_groups], dtype=jnp.float32)

    def train_program(self, batch_size: int, step: int = 0) -> jaxrt.CompiledPrograms:
        """The training program step number `step` runs (a phased workload's depends on the step)."""
        phases = self.manifest.phases_of_step(step)
        name, sha256 = self.manifest.program(batch_size).train_file_of(phases)
        return self._program(TRAIN, batch_size, name, sha256, donate=(0,), phases=phases)

    def sliced_program(self, batch_size: int) -> tuple[jaxrt.CompiledPrograms, SlicedProgram]:
        """The step in slices of `batch_size` (`SlicedProgram`) and what it is; one line where the
        folder was exported without it."""
        sliced = self.manifest.program(batch_size).sliced
        if sliced is None:
            raise UsageError(f"--exported {self.folder}: batch size {batch_size} was exported without a step in slices, "
                             "which the noise-scale meter reads; export it again with --noise-scale-micro-batches K, "
                             "or train without --noise-scale-micro-batches")
        return self._program(SLICED, batch_size, sliced.train_file, sliced.train_sha256, donate=(0,),
                             phases=f"sliced{sliced.parts}", networks=len(sliced.networks)), sliced

    def train_programs(self, batch_size: int) -> list[jaxrt.CompiledPrograms]:
        """The training programs of `batch_size` loaded so far: their compilations and seconds."""
        return [programs for (kind, size, _), programs in self.programs.items()
                if kind in (TRAIN, SLICED) and size == batch_size]

    def eval_program(self, batch_size: int) -> jaxrt.CompiledPrograms | None:
        program = self.manifest.program(batch_size)
        if program.eval_file is None or program.eval_sha256 is None:
            return None
        return self._program(EVAL, batch_size, program.eval_file, program.eval_sha256, donate=())

    def _exported(self, name: str, sha256: str, kind: str, batch_size: int, networks: int = 0) -> Any:
        """The deserialized artifact `name` (read once), checked against the manifest."""
        import jax

        if name not in self.deserialized:
            data = self.file(name, sha256)
            try:
                exported = jax.export.deserialize(bytearray(data))
            except Exception as error:  # noqa: BLE001 - any failure to read an artifact is one line
                raise UsageError(f"--exported {self.folder}/{name}: not a jax.export artifact JAX can read "
                                 f"({type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''})") from None
            check_signature(exported, self.manifest, kind, batch_size, f"--exported {self.folder}/{name}", networks)
            self.deserialized[name] = exported
        return self.deserialized[name]

    def _program(self, kind: str, batch_size: int, name: str, sha256: str, donate: tuple[int, ...],
                 phases: str | None = None, networks: int = 0) -> jaxrt.CompiledPrograms:
        key = (kind, batch_size, phases)
        if key not in self.programs:
            exported = self._exported(name, sha256, kind, batch_size, networks)
            self.programs[key] = jaxrt.CompiledPrograms(exported.call, donate_argnums=donate)
        return self.programs[key]
