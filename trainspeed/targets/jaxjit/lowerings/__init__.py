"""The jax family's own lowerings of aten ops, where torchax has none or one without a derivative.

Each module holds one group of ops and says what torchax lacks; `register` makes torchax's
environment run them. They are registered before a step is traced (`FunctionalStep`), and tested
op by op against PyTorch's outputs and gradients (tests/targets/jaxjit/lowerings/).
"""

from __future__ import annotations

from typing import Any

from trainspeed.targets.jaxjit.lowerings import attention, batch_norm, convolution, cross_entropy, pooling, recurrent

GROUPS = (pooling, batch_norm, recurrent, attention, cross_entropy, convolution)
"""Modules whose `lowerings()` map aten ops to functions: of JAX arrays, or of torchax tensors where
the module sets `TORCH_LEVEL` (an op that writes one of its inputs in place)."""


def register(env: Any) -> None:
    """Make `env` lower each group's ops with the group's functions, in place of torchax's own.

    torchax looks an op up among its JAX functions first and its torch-level ones second, by the
    overload and then by its packet (`aten.native_batch_norm` stands for every overload), so an op
    is put in the table of its kind and taken out of the other, under both keys."""
    import torch
    from torchax.ops import ops_registry

    env.load_ops()  # torchax's own tables first, which the ops here then replace
    for group in GROUPS:
        torch_level = getattr(group, "TORCH_LEVEL", False)
        for op, function in group.lowerings().items():
            operator = ops_registry.Operator(op, function, is_jax_function=not torch_level, is_user_defined=True,
                                             needs_env=getattr(function, "needs_env", False), is_view_op=False)
            is_aten = isinstance(op, torch._ops.OpOverload)
            (ops_registry.all_aten_ops if is_aten else ops_registry.all_torch_functions)[op] = operator
            (env._decomps if torch_level else env._ops)[op] = operator
            for key in (op, op.overloadpacket) if is_aten else (op,):
                (env._ops if torch_level else env._decomps).pop(key, None)
