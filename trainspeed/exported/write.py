"""`trainspeed export`: a workload's step, traced through the `jax` family, serialized for a platform
this machine need not have (`jax.export` lowers for a TPU on a CPU-only machine).

Per batch size, the training step (and the validation sums, where the workload has them) becomes
one artifact taking flat lists: the state's leaves in the manifest's order, the batch's columns in
its order, and the learning rates; it returns the new state's leaves and the loss (the state is
donated, so on the device it is updated in place). The initial state and one synthetic batch of
the largest size go beside them as npz; the manifest names every file with its sha256.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from trainspeed import jaxrt
from trainspeed.errors import UsageError
from trainspeed.exported.manifest import (
    BATCH_FILE,
    FORMAT,
    FORMAT_VERSION,
    INITIAL_STATES,
    MANIFEST,
    STATE_FILE,
    Column,
    DataSplit,
    EvalFormula,
    Leaf,
    Manifest,
    OptimizerGroup,
    PhaseProgram,
    Program,
    SlicedProgram,
    sha256_of,
)
from trainspeed.exported.out_folder import check_out, write_folder
from trainspeed.exported.stored_arrays import leaf_key, storable
from trainspeed.jaxrt.placement import Placement, data_parallel, start_devices
from trainspeed.targets import check_target_builds, get_target
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.targets.jaxjit.functional import FunctionalStep, host_batch_arrays, refuse_untraceable
from trainspeed.workloads import get_workload, reference_batch, resolve_size
from trainspeed.workloads.identity import identify
from trainspeed.workloads.phases import phase_cycle, variant_name

MAX_DIMENSION = 2**31 - 1
"""A batch dimension JAX (without x64) indexes in int32: a larger batch fails inside a trace."""
DRAWN_FROM_ELEMENTS = 4096
"""With `--initial-state drawn`, parameters of at least this many elements are drawn on the device;
smaller ones (biases, norms' scales) travel in the file as built."""


def _is_floating(dtype: Any) -> bool:
    """numpy's floating types and JAX's bfloat16 (ml_dtypes' bfloat16, which numpy does not call floating)."""
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.floating))


def _leaf(name: str, value: Any, initial_state: str) -> Leaf:
    """A state leaf's manifest entry: where its initial value comes from (`Leaf`)."""
    array = np.asarray(value)
    entry = Leaf(name, list(array.shape), str(array.dtype))
    if name.startswith("optim/") and not array.any():
        return dataclasses.replace(entry, source="zeros")
    if initial_state == "file" or array.size < DRAWN_FROM_ELEMENTS or not _is_floating(array.dtype):
        return entry
    as_float = array.astype(np.float64)
    if (as_float == as_float.flat[0]).all():
        return dataclasses.replace(entry, source="constant", mean=float(as_float.flat[0]))
    return dataclasses.replace(entry, source="normal", mean=float(as_float.mean()), std=float(as_float.std()))


def _flat_train(step: Callable[..., tuple[dict, Any]], names: list[str], columns: list[str]) -> Any:
    def train(state_leaves: list, batch_leaves: list, lrs: Any) -> tuple[list, Any]:
        state, loss = step(dict(zip(names, state_leaves)), dict(zip(columns, batch_leaves)), lrs)
        return [state[name] for name in names], loss

    return train


def _flat_sliced(functional: FunctionalStep, names: list[str], columns: list[str], parts: int,
                 networks: list[str]) -> Any:
    def train(state_leaves: list, batch_leaves: list, lrs: Any, order: Any) -> tuple[list, Any, list, list]:
        state, loss, small_sq, big_sq = functional.train_in_slices(
            dict(zip(names, state_leaves)), dict(zip(columns, batch_leaves)), lrs, order, parts=parts)
        return [state[name] for name in names], loss, [small_sq[name] for name in networks], \
            [big_sq[name] for name in networks]

    return train


def _exported_step(step: Callable[..., Any], platform: str, specs: tuple, what: str,
                   placement: Placement | None = None) -> Any:
    """`step` jitted with its state donated and exported for `platform` at `specs`; on a mesh
    (`placement`), traced for it, the batch (the second argument) split on its first dimension over
    the devices and everything else (the state, the learning rates, the outputs) whole on each. A
    failure to trace or lower is the workload's, in one line."""
    import jax

    try:
        if placement is None:
            return jax.export.export(jax.jit(step, donate_argnums=(0,)), platforms=[platform])(*specs)
        _, batch_specs, *rest = specs
        whole = placement.replicated()
        shardings = (whole, [placement.batch_sharding(len(spec.shape)) for spec in batch_specs], *(whole for _ in rest))
        program = jax.jit(placement.traced_step(step), donate_argnums=(0,), in_shardings=shardings,
                          out_shardings=whole)
        return jax.export.export(program, platforms=[platform])(*specs)
    except Exception as error:  # noqa: BLE001
        if isinstance(error, UsageError):
            raise
        raise refuse_untraceable(error, what) from None


def _exported_eval(evaluate: Callable[..., Any], platform: str, specs: tuple, placement: Placement | None) -> Any:
    """The validation sums exported for `platform`, on a mesh as `_exported_step` lays its step."""
    import jax

    if placement is None:
        return jax.export.export(jax.jit(evaluate), platforms=[platform])(*specs)
    _, batch_specs = specs
    whole = placement.replicated()
    program = jax.jit(placement.traced(evaluate), out_shardings=whole,
                      in_shardings=(whole, [placement.batch_sharding(len(spec.shape)) for spec in batch_specs]))
    return jax.export.export(program, platforms=[platform])(*specs)


def _mesh(devices: int | None, batch_sizes: list[int], noise_scale_micro_batches: int) -> Placement | None:
    """`export --devices N`: a mesh of N of this machine's devices to trace the programs for (on a
    CPU, N host devices; the programs keep the mesh's shape, not its devices, so they run on any
    host's N devices); None without the flag."""
    if devices is None:
        return None
    uneven = [size for size in batch_sizes if size % devices]
    if uneven:
        raise UsageError(f"export: --devices {devices} must divide every batch size (each device takes an equal slice); "
                         f"{','.join(map(str, uneven))} do not")
    if noise_scale_micro_batches > 1:
        raise UsageError("export: --devices and --noise-scale-micro-batches: the step in slices is exported for one "
                         "device only; drop one of them")
    start_devices(devices, asked_by="export: --devices")
    return data_parallel(devices, asked_by="export: --devices")


def _check_slices(functional: FunctionalStep, batch_sizes: list[int], parts: int) -> None:
    """One line where a step in `parts` slices cannot be exported for these batch sizes."""
    if parts == 1:
        return
    if parts < 1:
        raise UsageError(f"--noise-scale-micro-batches must be >= 1, got {parts}")
    if functional.phased:
        raise UsageError("export: --noise-scale-micro-batches: a step of several updates (its phases) is exported "
                         "whole; export it without the flag")
    uneven = [size for size in batch_sizes if size % parts]
    if uneven:
        raise UsageError(f"export: --noise-scale-micro-batches {parts} must divide every batch size; "
                         f"{','.join(map(str, uneven))} do not")


def _step_functions(functional: FunctionalStep, micro_batches: int
                    ) -> tuple[list[str], dict[str | None, Callable[..., tuple[dict, Any]]]]:
    """The phases of each step of the cycle (none for a step of one backward()) and the training
    function of each distinct list of phases, the one most steps run first, each accumulating its
    gradient over `micro_batches` slices of the batch."""
    if not functional.phased:
        return [], {None: functools.partial(functional.train, micro_batches=micro_batches)}
    cycle = phase_cycle(functional.trainable)  # type: ignore[arg-type]
    names = [variant_name(phases) for phases in cycle]
    by_name = dict(zip(names, cycle))
    ordered = sorted(by_name, key=lambda name: -names.count(name))
    return names, {name: functools.partial(functional.train_phases, phases=by_name[name], micro_batches=micro_batches)
                   for name in ordered}


def _micro_batches_of(batch_size: int, micro_batch_size: int | None) -> int:
    """How many slices a step of `batch_size` accumulates over with `--micro-batch-size`: a batch
    no larger than the micro-batch runs whole."""
    if micro_batch_size is None or batch_size <= micro_batch_size:
        return 1
    return batch_size // micro_batch_size


def _check_micro_batch_size(batch_sizes: list[int], micro_batch_size: int | None, noise_scale_micro_batches: int) -> None:
    """One line where `--micro-batch-size` cannot cut these batch sizes into equal slices."""
    if micro_batch_size is None:
        return
    if micro_batch_size < 1:
        raise UsageError(f"--micro-batch-size must be >= 1, got {micro_batch_size}")
    uneven = [size for size in batch_sizes if size > micro_batch_size and size % micro_batch_size]
    if uneven:
        raise UsageError(f"export: --micro-batch-size {micro_batch_size} must divide every larger batch size; "
                         f"{','.join(map(str, uneven))} do not")
    if noise_scale_micro_batches > 1:
        raise UsageError("export: --micro-batch-size and --noise-scale-micro-batches both cut the step into slices; "
                         "give one of them")


def _flat_eval(functional: FunctionalStep, names: list[str], columns: list[str], metrics: list[str]) -> Any:
    def evaluate(state_leaves: list, batch_leaves: list) -> list:
        sums = functional.evaluate(dict(zip(names, state_leaves)), dict(zip(columns, batch_leaves)))
        return [sums[name] for name in metrics]

    return evaluate


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{key: storable(array) for key, array in arrays.items()})
    return buffer.getvalue()


def _json_safe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [_json_safe(item) for item in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


def _optimizer_groups(functional: FunctionalStep) -> list[OptimizerGroup]:
    groups = []
    for name, optimizer in functional.trainable.optimizers.items():
        for group in optimizer.param_groups:
            hyper = {key: _json_safe(value) for key, value in group.items() if key not in ("params", "lr")}
            groups.append(OptimizerGroup(name, type(optimizer).__name__, float(group["lr"]), hyper))
    return groups


def _probe_totals(shapes: dict[str, Any], generator: np.random.Generator) -> dict[str, torch.Tensor]:
    """Eval sums of the eval program's shapes, drawn positive (integers where the sum is one)."""
    totals = {}
    for name, spec in shapes.items():
        values = generator.uniform(1.0, 1000.0, tuple(spec.shape))
        if np.issubdtype(np.dtype(spec.dtype), np.integer):
            values = np.rint(values)
        totals[name] = torch.as_tensor(values.astype(np.float64 if not np.issubdtype(np.dtype(spec.dtype), np.integer)
                                                     else np.int64))
    return totals


def _candidates(shapes: dict[str, Any]) -> list[EvalFormula]:
    scalars = [name for name, spec in shapes.items() if tuple(spec.shape) == ()]
    vectors = [name for name, spec in shapes.items() if len(tuple(spec.shape)) == 1]
    found = [EvalFormula("", "value", name) for name in scalars]
    found += [EvalFormula("", "ratio", top, per) for top in scalars for per in scalars if top != per]
    found += [EvalFormula("", "max_ratio", top, per) for top in vectors for per in scalars]
    return found


def eval_summary(trainable: Any, shapes: dict[str, Any], seed: int = 0) -> list[EvalFormula]:
    """Which formula over the eval sums gives each metric of the workload's `summarize_eval`,
    found by calling it on two draws of sums: the metrics a machine with JAX only can report.
    A metric no candidate gives on both draws is left out (and `train --exported` says so)."""
    generator = np.random.default_rng(seed)
    draws = [_probe_totals(shapes, generator) for _ in range(2)]
    try:
        summaries = [trainable.summarize_eval(dict(totals)) for totals in draws]
    except Exception:  # noqa: BLE001 - a summary that needs more than sums is reported by name below
        return []
    plain = [{name: value.numpy() for name, value in totals.items()} for totals in draws]
    formulas = []
    for metric in summaries[0]:
        for candidate in _candidates(shapes):
            if all(math.isclose(candidate.value(sums), float(summary[metric]), rel_tol=1e-9)
                   for sums, summary in zip(plain, summaries)):
                formulas.append(dataclasses.replace(candidate, metric=metric))
                break
    return formulas


def _data_split(workload: Any) -> DataSplit | None:
    """The split of the workload's shard sets, where it reads columnar shards (`shard_batches`)."""
    spec = getattr(workload, "shard_batches", None)
    return None if spec is None else DataSplit(spec.split_column, int(spec.val_per_mille))


def _check_batch_memory(workload: Any, size: str, rows: int, seed: int) -> None:
    """One line, before anything is traced, where the synthetic batch the folder carries (`rows`
    samples: the largest batch size, or --batch-rows) would not fit in this machine's memory."""
    import psutil

    sample = host_batch_arrays(workload.synthetic_batch(size, 1, torch.Generator().manual_seed(seed)))
    needed = rows * sum(array.nbytes for array in sample.values())
    available = psutil.virtual_memory().available
    if needed > available:
        raise UsageError(f"export: the synthetic batch of {rows:,} samples (the largest --batch-sizes) takes "
                         f"{needed / 2**30:,.1f} GiB, more than this machine's {available / 2**30:,.1f} GiB free; "
                         "give --batch-rows N (a bench of a larger size repeats its N samples)")


def export_steps(workload_name: str, size: str | None, target_name: str, platform: str, batch_sizes: list[int],
                 out: Path, seed: int = 0, command: str | None = None, initial_state: str = "file",
                 noise_scale_micro_batches: int = 1, micro_batch_size: int | None = None,
                 batch_rows: int | None = None, devices: int | None = None) -> Manifest:
    """Write the folder `out` (which must not exist) and return its manifest; with
    `noise_scale_micro_batches` k > 1, each batch size's step in k slices too (`SlicedProgram`),
    for the noise-scale meter of `train --exported`; with `micro_batch_size` n, each batch size
    above n trains in micro-batches of n samples, its gradient accumulated before one update; with
    `batch_rows`, the synthetic batch holds that many samples (a bench of a larger size repeats them);
    with `devices` N, every program is traced for a mesh of N devices (`_mesh`)."""
    import jax

    if initial_state not in INITIAL_STATES:
        raise UsageError(f"--initial-state {initial_state}: choose file or drawn")
    if platform not in jaxrt.PLATFORMS:
        raise UsageError(f"--platform {platform}: choose one of {', '.join(jaxrt.PLATFORMS)}")
    check_out(out)
    too_large = [size for size in batch_sizes if size > MAX_DIMENSION]
    if too_large:
        raise UsageError(f"--batch-sizes: {too_large[0]:,} is more than {MAX_DIMENSION:,}, the longest dimension JAX "
                         "indexes without 64-bit integers; give smaller batch sizes")
    placement = _mesh(devices, batch_sizes, noise_scale_micro_batches)  # before JAX starts: it fixes its devices
    target = get_target(target_name)
    if not isinstance(target, JaxTarget):
        raise UsageError(f"--target {target_name}: export traces the step through the jax family; give "
                         "jax:jit:fp32 or jax:jit:bf16")
    workload = get_workload(workload_name)
    check_target_builds(target_name, workload, devices or 1)
    size = resolve_size(workload, size)
    rows = min(max(batch_sizes), batch_rows or max(batch_sizes))
    _check_batch_memory(workload, size, rows, seed)
    identity = identify(workload)
    functional = FunctionalStep(workload.build(size, seed=seed), target.spec.precision, seed, target.spec.options)
    _check_slices(functional, batch_sizes, noise_scale_micro_batches)
    _check_micro_batch_size(batch_sizes, micro_batch_size, noise_scale_micro_batches)
    state = functional.initial_state()
    names = sorted(state)
    networks = list(functional.trainable.optimizers)
    host_batch = host_batch_arrays(workload.synthetic_batch(size, rows, torch.Generator().manual_seed(seed)))
    columns = list(host_batch)
    state_specs = [jax.ShapeDtypeStruct(state[name].shape, state[name].dtype) for name in names]
    lrs_spec = jax.ShapeDtypeStruct((functional.group_count,), "float32")
    files: dict[str, bytes] = {}
    programs, metric_names, metric_shapes = [], [], {}
    for batch_size in batch_sizes:
        micro_batches = _micro_batches_of(batch_size, micro_batch_size)
        step_phases, step_functions = _step_functions(functional, micro_batches)
        batch_specs = [jax.ShapeDtypeStruct((batch_size, *host_batch[c].shape[1:]), host_batch[c].dtype) for c in columns]
        phase_programs = []
        for phases, step_function in step_functions.items():
            train = _exported_step(_flat_train(step_function, names, columns), platform,
                                   (state_specs, batch_specs, lrs_spec), f"{workload.name}'s training step", placement)
            train_file = f"train_b{batch_size}.jaxexport" if phases is None else f"train_b{batch_size}_{phases}.jaxexport"
            files[train_file] = bytes(train.serialize())
            if phases is not None:
                phase_programs.append(PhaseProgram(phases, train_file, sha256_of(files[train_file])))
        first = phase_programs[0] if phase_programs else None
        program = Program(batch_size, first.train_file if first else train_file,
                          first.train_sha256 if first else sha256_of(files[train_file]), phase_programs=phase_programs,
                          micro_batches=micro_batches)
        if noise_scale_micro_batches > 1:
            parts = noise_scale_micro_batches
            order_spec = jax.ShapeDtypeStruct((batch_size,), "int32")
            sliced = _exported_step(_flat_sliced(functional, names, columns, parts, networks), platform,
                                    (state_specs, batch_specs, lrs_spec, order_spec),
                                    f"{workload.name}'s training step in {parts} slices")
            sliced_file = f"train_b{batch_size}_sliced{parts}.jaxexport"
            files[sliced_file] = bytes(sliced.serialize())
            program = dataclasses.replace(program, sliced=SlicedProgram(parts, networks, sliced_file,
                                                                        sha256_of(files[sliced_file])))
        try:
            shapes = jax.eval_shape(functional.evaluate, dict(zip(names, state_specs)), dict(zip(columns, batch_specs)))
        except Exception as error:  # noqa: BLE001
            raise refuse_untraceable(error, f"{workload.name}'s validation step") from None
        metric_names = sorted(shapes)
        metric_shapes = shapes
        if metric_names:
            evaluate = _exported_eval(_flat_eval(functional, names, columns, metric_names), platform,
                                      (state_specs, batch_specs), placement)
            eval_file = f"eval_b{batch_size}.jaxexport"
            files[eval_file] = bytes(evaluate.serialize())
            program = dataclasses.replace(program, eval_file=eval_file, eval_sha256=sha256_of(files[eval_file]))
        programs.append(program)
    leaves = [_leaf(name, state[name], initial_state) for name in names]
    files[STATE_FILE] = _npz({leaf_key(index): np.asarray(state[name]) for index, name in enumerate(names)
                              if leaves[index].source == "file"})
    files[BATCH_FILE] = _npz(host_batch)
    import torchax

    manifest = Manifest(
        format=FORMAT, format_version=FORMAT_VERSION, workload=workload.name, workload_module=identity.module,
        workload_sha256=identity.definition_sha256, workload_version=identity.version, size=size,
        target=str(target.spec), precision=target.spec.precision, platforms=[platform],
        flops_per_sample=float(workload.flops_per_sample(size)),
        columns=[Column(c, str(host_batch[c].dtype), list(host_batch[c].shape[1:])) for c in columns],
        state=leaves,
        programs=programs, optimizer_groups=_optimizer_groups(functional),
        lr_reference_batch=reference_batch(workload), eval_metrics=metric_names,
        batch_rows=rows, state_sha256=sha256_of(files[STATE_FILE]), batch_sha256=sha256_of(files[BATCH_FILE]),
        file_bytes={name: len(data) for name, data in files.items()},
        jax_version=jax.__version__,
        versions={"jax": jaxrt.versions(), "torchax": torchax.__version__, "torch": torch.__version__,
                  "exported_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
        seed=seed, initial_state=initial_state, command=command,
        eval_summary=eval_summary(functional.trainable, metric_shapes, seed) if metric_names else [],
        data_split=_data_split(workload), step_phases=step_phases, devices=devices,
    )
    files[MANIFEST] = (json.dumps(manifest.to_json(), indent=1) + "\n").encode()
    write_folder(out, files)
    return manifest
