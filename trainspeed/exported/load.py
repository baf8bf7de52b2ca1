"""An exported step folder, loaded where only JAX and numpy are: the checked manifest, the initial
state and batch (npz, no pickle), and the programs, deserialized and compiled per batch size on
first use (their compile seconds counted apart from the steps)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainspeed import jaxrt
from trainspeed.errors import UsageError
from trainspeed.exported.stored_arrays import restored
from trainspeed.exported.manifest import (
    BATCH_FILE,
    STATE_FILE,
    Manifest,
    SlicedProgram,
    check_runtime,
    read_checked,
    read_manifest,
)


def _arrays(folder: Path, name: str, sha256: str) -> dict[str, Any]:
    import numpy as np

    data = read_checked(folder, name, sha256)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
            return {key: loaded[key] for key in loaded.files}
    except (ValueError, OSError, EOFError) as error:
        raise UsageError(f"--exported {folder}/{name}: not an npz of plain arrays ({error})") from None


@dataclass
class ExportedSteps:
    """One exported folder, ready to step on this machine's JAX device."""

    folder: Path
    manifest: Manifest
    programs: dict[tuple[str, int, str | None], Any] = field(default_factory=dict)
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The npz files read so far (every configuration starts from the same state and batch)."""

    @classmethod
    def open(cls, folder: Path, workload: str | None = None) -> "ExportedSteps":
        import jax

        manifest = read_manifest(folder)
        check_runtime(manifest, folder, jax.__version__, jaxrt.device().platform, workload)
        return cls(folder, manifest)

    def initial_state(self) -> list[Any]:
        """The state's leaves in the programs' order, on the device: read from state.npz (checked
        against the manifest), or made there as the manifest says (zeros, a constant, a draw)."""
        import jax
        import jax.numpy as jnp

        needs_file = any(leaf.source == "file" for leaf in self.manifest.state)
        arrays = self._npz(STATE_FILE, self.manifest.state_sha256) if needs_file else {}
        key = jax.random.PRNGKey(self.manifest.seed)
        leaves = []
        for index, leaf in enumerate(self.manifest.state):
            if leaf.source == "file":
                array = arrays.get(f"leaf{index:05d}")
                array = None if array is None else restored(array, leaf.dtype)
                if array is None or list(array.shape) != leaf.shape or str(array.dtype) != leaf.dtype:
                    raise UsageError(f"--exported {self.folder}/{STATE_FILE}: leaf {leaf.name} is not the manifest's "
                                     f"{leaf.dtype}{leaf.shape}; export the step again")
                leaves.append(jax.device_put(array, jaxrt.device()))
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
        return leaves

    def host_batch(self, batch_size: int) -> list[Any]:
        """The exported synthetic batch's first `batch_size` samples, as host arrays in column order;
        a batch size above the samples it holds (`export --batch-rows`) repeats them in order."""
        import numpy as np

        arrays = self._npz(BATCH_FILE, self.manifest.batch_sha256)
        columns = []
        for column in self.manifest.columns:
            array = arrays.get(column.name)
            if array is None or list(array.shape[1:]) != column.sample_shape or str(array.dtype) != column.dtype:
                raise UsageError(f"--exported {self.folder}/{BATCH_FILE}: column {column.name} is not the "
                                 f"manifest's {column.dtype}{column.sample_shape}; export the step again")
            if len(array) == 0:
                raise UsageError(f"--exported {self.folder}/{BATCH_FILE}: column {column.name} holds no sample; "
                                 "export the step again")
            repeats = -(-batch_size // len(array))
            columns.append((np.concatenate([array] * repeats) if repeats > 1 else array)[:batch_size])
        return columns

    def _npz(self, name: str, sha256: str) -> dict[str, Any]:
        if name not in self.read:
            self.read[name] = _arrays(self.folder, name, sha256)
        return self.read[name]

    def verify(self, batch_sizes: list[int]) -> None:
        """Every file these batch sizes will read has the manifest's sha256: a cut or changed file
        is one line before any size is measured, not an error after the sizes before it."""
        read_checked(self.folder, STATE_FILE, self.manifest.state_sha256)
        read_checked(self.folder, BATCH_FILE, self.manifest.batch_sha256)
        for batch_size in batch_sizes:
            program = self.manifest.program(batch_size)
            for name, sha256 in program.train_files():
                read_checked(self.folder, name, sha256)
            if program.eval_file is not None and program.eval_sha256 is not None:
                read_checked(self.folder, program.eval_file, program.eval_sha256)

    def learning_rates(self) -> Any:
        import jax.numpy as jnp

        return jnp.asarray([group.lr for group in self.manifest.optimizer_groups], dtype=jnp.float32)

    def train_program(self, batch_size: int, step: int = 0) -> jaxrt.CompiledPrograms:
        """The training program step number `step` runs (a phased workload's depends on the step)."""
        phases = self.manifest.phases_of_step(step)
        name, sha256 = self.manifest.program(batch_size).train_file_of(phases)
        return self._program("train", batch_size, name, sha256, donate=(0,), phases=phases)

    def sliced_program(self, batch_size: int) -> tuple[jaxrt.CompiledPrograms, SlicedProgram]:
        """The step in slices of `batch_size` (`SlicedProgram`) and what it is; one line where the
        folder was exported without it."""
        sliced = self.manifest.program(batch_size).sliced
        if sliced is None:
            raise UsageError(f"--exported {self.folder}: batch size {batch_size} was exported without a step in slices, "
                             "which the noise-scale meter reads; export it again with --noise-scale-micro-batches K, "
                             "or train without --noise-scale-micro-batches")
        return self._program("train", batch_size, sliced.train_file, sliced.train_sha256, donate=(0,),
                             phases=f"sliced{sliced.parts}"), sliced

    def train_programs(self, batch_size: int) -> list[jaxrt.CompiledPrograms]:
        """The training programs of `batch_size` loaded so far: their compilations and seconds."""
        return [programs for (kind, size, _), programs in self.programs.items() if kind == "train" and size == batch_size]

    def eval_program(self, batch_size: int) -> jaxrt.CompiledPrograms | None:
        program = self.manifest.program(batch_size)
        if program.eval_file is None or program.eval_sha256 is None:
            return None
        return self._program("eval", batch_size, program.eval_file, program.eval_sha256, donate=())

    def _program(self, kind: str, batch_size: int, name: str, sha256: str, donate: tuple[int, ...],
                 phases: str | None = None) -> jaxrt.CompiledPrograms:
        import jax

        key = (kind, batch_size, phases)
        if key not in self.programs:
            data = read_checked(self.folder, name, sha256)
            try:
                exported = jax.export.deserialize(bytearray(data))
            except Exception as error:  # noqa: BLE001 - any failure to read an artifact is one line
                raise UsageError(f"--exported {self.folder}/{name}: not a jax.export artifact JAX can read "
                                 f"({type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''})") from None
            self.programs[key] = jaxrt.CompiledPrograms(exported.call, donate_argnums=donate)
        return self.programs[key]
