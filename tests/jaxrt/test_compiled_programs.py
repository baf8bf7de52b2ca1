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
