"""`CompiledPrograms`: one program per argument tree, shapes and dtypes, and the next call of the
same signature runs that program, not a new compile."""

from __future__ import annotations

import pytest

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


def test_a_program_is_compiled_once_per_tree_shape_and_dtype() -> None:
    import jax.numpy as jnp

    from trainspeed.jaxrt import CompiledPrograms

    def step(state: dict, batch: object) -> tuple[dict, object]:
        return {name: value + batch.sum() for name, value in state.items()}, batch.mean()

    compiled = 0

    def counted() -> None:
        nonlocal compiled
        compiled += 1

    programs = CompiledPrograms(step, donate_argnums=(0,), on_compile=counted)
    state = {"a": jnp.zeros((3,)), "b": jnp.ones((2, 2))}
    for _ in range(3):
        state, mean = programs(state, jnp.ones((4,)))
    assert (programs.count, compiled) == (1, 1)
    assert float(state["a"][0]) == 12.0 and float(mean) == 1.0
    state, _ = programs(state, jnp.ones((8,)))  # a new batch shape
    state, _ = programs(state, jnp.ones((8,), dtype=jnp.int32))  # a new dtype
    state, _ = programs({**state, "c": jnp.zeros((1,))}, jnp.ones((8,)))  # a new tree
    assert (programs.count, compiled) == (4, 4)
    assert programs.last_compile_s() is not None and programs.last_compile_s() >= 0.0


def test_a_programs_costs_hold_xlas_memory_analysis() -> None:
    """JAX's CPU backend reports the memory analysis: arguments, outputs, the donated argument's
    bytes an output reuses, temporaries, code; each in the row field that documents it."""
    import jax.numpy as jnp

    from trainspeed.jaxrt import MEMORY_ANALYSIS_FIELDS, CompiledPrograms

    def step(state: object, batch: object) -> tuple[object, object]:
        return state + batch.sum(), jnp.tanh(batch @ batch.T).mean()

    programs = CompiledPrograms(step, donate_argnums=(0,))
    programs(jnp.zeros((64, 64)), jnp.ones((32, 16)))
    costs = programs.last_costs()
    assert set(MEMORY_ANALYSIS_FIELDS.values()) <= set(costs), costs
    assert costs["program_argument_bytes"] == 64 * 64 * 4 + 32 * 16 * 4
    assert costs["program_output_bytes"] >= 64 * 64 * 4 and costs["program_alias_bytes"] == 64 * 64 * 4
    assert costs["program_flops"] > 0


def test_a_program_whose_loop_runs_more_than_once_keeps_its_trip_counts_and_no_flop_count() -> None:
    """XLA's cost analysis counts a loop's body once: a scan over 4 slices reads as a quarter of its
    matmuls. Such a program's FLOPs and bytes accessed are left out, and its loops' trip counts
    kept; a program without a loop keeps XLA's counts, which are then the whole program's."""
    import jax
    import jax.numpy as jnp

    from trainspeed.jaxrt import CompiledPrograms

    def scanned(x: object, w: object) -> object:
        return jax.lax.scan(lambda total, piece: (total + (piece @ w).sum(), None), 0.0, x)[0]

    def whole(x: object, w: object) -> object:
        return (x.reshape(-1, x.shape[-1]) @ w).sum()

    x, w = jnp.ones((4, 64, 128)), jnp.ones((128, 128))
    looped = CompiledPrograms(scanned)
    looped(x, w)
    costs = looped.last_costs()
    assert costs["program_loop_trips"] == [4], costs
    assert "program_flops" not in costs and "program_bytes_accessed" not in costs
    assert costs["program_temp_bytes"] >= 0
    plain = CompiledPrograms(whole)
    plain(x, w)
    costs = plain.last_costs()
    assert "program_loop_trips" not in costs
    assert costs["program_flops"] >= 2 * 4 * 64 * 128 * 128
