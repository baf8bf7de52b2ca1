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
