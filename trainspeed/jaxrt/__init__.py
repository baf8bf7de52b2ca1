"""What a JAX process knows of its device, with no torch: the device and its kind, the versions,
memory, out-of-memory errors, the peak matmul probe, and compiled programs' counts and seconds.

Shared by the `jax` target family (which has torch) and the runner of exported steps (which must
run where only JAX is), so both write the same row fields.
"""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from trainspeed.jaxrt.hlo_loops import loop_trips

PLATFORMS = ("tpu", "cpu", "cuda", "rocm")
"""What `jax.export` lowers a step for, on any machine (`trainspeed export`, `check --platform`)."""
JAX_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "Resource exhausted")


def jax_missing_reason() -> str | None:
    """None when JAX imports, else what to install."""
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        return "jax is not installed: pip install 'trainspeed[jax]'"
    return None


def device() -> Any:
    """The device JAX runs on by default: a TPU where one is, else the CPU (JAX_PLATFORMS picks)."""
    import jax

    return jax.devices()[0]


def device_name() -> str:
    found = device()
    kind = getattr(found, "device_kind", "") or found.platform
    return kind if found.platform != "cpu" else f"JAX CPU ({kind})"


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> str:
    """`jax X, jaxlib Y[, libtpu Z]`: what a row was measured with and an artifact was made by."""
    parts = [f"{name} {_version(name)}" for name in ("jax", "jaxlib", "libtpu") if _version(name)]
    return ", ".join(parts)


def is_oom(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or any(marker in str(error) for marker in JAX_OOM_MARKERS)


def peak_memory_bytes() -> int | None:
    """The device's peak bytes in use where it says (TPU, GPU); None on the CPU, which does not."""
    stats = device().memory_stats() if hasattr(device(), "memory_stats") else None
    peak = (stats or {}).get("peak_bytes_in_use")
    return int(peak) if peak else None


def peak_matmul_tflops(dtype: str, size: int, chain: int = 10, repeats: int = 3) -> float:
    """TFLOP/s of a dependent chain of `chain` square matmuls of `size` in `dtype` in one program,
    the best of `repeats` synced timings: the chip's ceiling measured on it, which a row keeps
    beside MFU against the chip's nominal peak (and which MFU divides by where no nominal peak is
    known, `trainspeed.nominal_peaks`). Each product needs the one before it, so the compiler
    can neither merge nor skip any (the torch probe of `trainspeed.bench.peak` says why)."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.PRNGKey(0))
    start_vector = jax.random.normal(keys[0], (size, size), dtype)
    weight = (jax.random.normal(keys[1], (size, size), jnp.float32) / size**0.5).astype(dtype)
    program = jax.jit(lambda x, w: jax.lax.fori_loop(0, chain, lambda _, y: y @ w, x))
    program(start_vector, weight).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        program(start_vector, weight).block_until_ready()
        best = min(best, time.perf_counter() - began)
    return 2 * size**3 * chain / best / 1e12


def probe_size() -> int:
    """8192 on an accelerator (a TPU's matrix units need that to fill), 1024 on the CPU."""
    return 1024 if device().platform == "cpu" else 8192


@dataclass
class CompiledPrograms:
    """One jitted function's programs, compiled ahead of time per input shape and counted, with
    the seconds each compile took (a row says them apart from its steps)."""

    function: Callable[..., Any]
    donate_argnums: tuple[int, ...] = ()
    on_compile: Callable[[], None] | None = None
    """Called after each compilation (a target counts its compilations over every program it made)."""
    programs: dict[Any, Any] = field(default_factory=dict)
    compile_s: dict[Any, float] = field(default_factory=dict)
    costs: dict[Any, dict[str, Any]] = field(default_factory=dict)
    """What XLA says of each compiled program (`program_costs`)."""

    def __call__(self, *args: Any) -> Any:
        import jax

        key = _signature(args)
        program = self.programs.get(key)
        if program is None:
            program, self.compile_s[key] = compile_timed(
                jax.jit(self.function, donate_argnums=self.donate_argnums).lower(*args))
            self.programs[key] = program
            self.costs[key] = program_costs(program)
            if self.on_compile is not None:
                self.on_compile()
        return program(*args)

    @property
    def count(self) -> int:
        return len(self.programs)

    def last_compile_s(self) -> float | None:
        return list(self.compile_s.values())[-1] if self.compile_s else None

    def last_costs(self) -> dict[str, Any]:
        return list(self.costs.values())[-1] if self.costs else {}


def _signature(args: tuple[Any, ...]) -> Hashable:
    """What a program is compiled for (the arguments' tree, each leaf's shape and dtype), as a dict
    key. Every step pays it: built in one pass over the flattened leaves, a 421-leaf state costs
    about 0.1 ms, where mapping the tree and printing it took 1.3 ms, a third of a 4 ms TPU step."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(args)
    return treedef, tuple([(leaf.shape, leaf.dtype) for leaf in leaves])


def compile_timed(lowered: Any) -> tuple[Any, float]:
    """A lowered program compiled, with the seconds its compile took (a TPU's can take minutes)."""
    start = time.perf_counter()
    program = lowered.compile()
    return program, time.perf_counter() - start


MEMORY_ANALYSIS_FIELDS = {
    "temp_size_in_bytes": "program_temp_bytes",
    "argument_size_in_bytes": "program_argument_bytes",
    "output_size_in_bytes": "program_output_bytes",
    "alias_size_in_bytes": "program_alias_bytes",
    "generated_code_size_in_bytes": "program_generated_code_bytes",
}
"""`compiled.memory_analysis()`'s attributes -> the result-row fields that hold them."""


def loop_trip_counts(compiled: Any) -> list[int] | None:
    """The trip count of each loop (`while`) in a compiled program's optimized HLO, in the order the
    text holds them (`hlo_loops.loop_trips`), 0 where it is not known; None where the backend gives
    no text."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - a backend without the text says nothing of loops
        return None
    if not text:
        return None
    return [trips or 0 for trips in loop_trips(text).values()]


def program_costs(compiled: Any) -> dict[str, Any]:
    """XLA's own account of a compiled program, as result-row fields: its FLOPs and the bytes it
    reads and writes per call (`cost_analysis`): where a step's time goes when it is memory-bound;
    and the device memory it holds (`memory_analysis`): its temporaries, arguments, outputs, the
    outputs that reuse an argument's buffer and its code: XLA's count of what the step holds,
    which a row keeps beside the runtime's peak (peak_memory_bytes). Fields a backend does not
    report are left out.

    XLA's cost analysis counts a loop's body once, whatever its trip count: a program whose loops
    run more than once (a step over micro-batches, a network's layers scanned) would read as a
    fraction of its work. Its loops' trip counts are kept (`program_loop_trips`), and where any is
    not 1 its FLOPs and bytes accessed are left out rather than given as that fraction."""
    fields: dict[str, Any] = {}
    loops = loop_trip_counts(compiled)
    if loops:
        fields["program_loop_trips"] = loops
    counted_once = any(trips != 1 for trips in loops or [])
    try:
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        if cost and cost.get("flops") and not counted_once:
            fields["program_flops"] = float(cost["flops"])
        if cost and cost.get("bytes accessed") and not counted_once:
            fields["program_bytes_accessed"] = float(cost["bytes accessed"])
    except Exception:  # noqa: BLE001 - an analysis the backend lacks is no measurement, not an error
        pass
    try:
        memory = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        memory = None
    for attribute, name in MEMORY_ANALYSIS_FIELDS.items():
        value = getattr(memory, attribute, None) if memory is not None else None
        if value is not None:
            fields[name] = float(value)
    return fields
