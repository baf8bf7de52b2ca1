"""The port check of the `jax` family: does a workload's step lower to one program for a platform,
here, without that platform's device? (`trainspeed check --target jax:jit:bf16 --platform tpu`)

`jax.export` lowers a jitted function for a platform the machine does not have, so the whole check
is a trace and a lowering on this CPU:

- every op torchax has no lowering for is noted with the workload's line that called it, and the
  trace goes on with a stand-in of the op's output shape (computed on torch's meta device), so
  one check names all of them, not only the first;
- a value read on the host (`.item()`, a Python `if` on a tensor), or an op whose lowering has no
  derivative, ends the trace: it is named with its line, and whether the training step or the
  validation step stopped;
- the step is traced twice: where the second program differs from the first, a Python value that
  changes per step is compiled in, and every step would compile again; likewise the validation
  step is lowered beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from trainspeed.targets.jaxjit.functional import FunctionalStep, StepNotTraceable, host_batch_arrays, workload_line
from trainspeed.workloads.base import Workload


@dataclass
class LoweringFindings:
    """What one lowering check found."""

    missing_ops: dict[str, list[str]] = field(default_factory=dict)
    """`aten::NAME` -> the workload lines that called it (none: the backward pass or torch itself)."""
    untraceable: str | None = None
    """Why the trace stopped (a value read on the host, an op without a derivative), with the step it
    stopped in and the workload's line; None when it did not."""
    programs_per_step: int = 1
    """Distinct programs over two traced steps: 2 means every step compiles again."""


@contextlib.contextmanager
def _stand_ins_for_missing_ops(functional: FunctionalStep, findings: LoweringFindings) -> Iterator[None]:
    """While tracing, an aten op torchax cannot lower is noted and replaced by zeros of the shape
    and dtype torch's meta device gives for it, so the trace reaches the ops after it."""
    from torchax.ops.ops_registry import Operator
    from torchax.tensor import OperatorNotFound

    env = functional.env
    original = env._get_op_or_decomp

    def looked_up(func: Any) -> Any:
        try:
            return original(func)
        except OperatorNotFound:
            if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten":
                raise  # torchax runs a function it has no lowering for as torch does, down to aten ops
            name = f"aten::{func.overloadpacket.__name__}"
            line = workload_line(traceback.extract_stack())
            callers = findings.missing_ops.setdefault(name, [])
            if line and line not in callers:
                callers.append(line)
            return Operator(func, _meta_stand_in(func, functional), is_jax_function=False, is_user_defined=True,
                            needs_env=False, is_view_op=False)

    env._get_op_or_decomp = looked_up
    try:
        yield
    finally:
        del env._get_op_or_decomp


def _meta_stand_in(func: Any, functional: FunctionalStep) -> Any:
    from torch.utils import _pytree
    from torch.utils._python_dispatch import _disable_current_modes
    from torchax.tensor import Tensor

    def on_meta(value: Any) -> Any:
        return torch.empty(value.shape, dtype=value.dtype, device="meta") if isinstance(value, torch.Tensor) else value

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        import jax.numpy as jnp
        from torchax.ops import mappings

        with _disable_current_modes(), torch._C.DisableTorchFunction():
            result = func(*_pytree.tree_map(on_meta, args), **_pytree.tree_map(on_meta, kwargs))

        def zeros(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return Tensor(jnp.zeros(tuple(value.shape), mappings.t2j_dtype(value.dtype)), functional.env)
            return value

        return _pytree.tree_map(zeros, result)

    return stand_in


def _traced(trace: Callable[[], None], what: str) -> str | None:
    """Run `trace`; where it stops, the refusal's one line naming `what` stopped, else None."""
    from trainspeed.targets.jaxjit.functional import refuse_untraceable

    try:
        trace()
    except StepNotTraceable:
        raise
    except Exception as error:  # noqa: BLE001 - a host read (or another trace failure) ends the trace: told in one line
        return str(refuse_untraceable(error, what))
    return None


def check_lowering(workload: Workload, size: str, precision: str, platform: str, batch_size: int,
                   seed: int, options: tuple[str, ...] = ()) -> LoweringFindings:
    """Trace and lower the workload's step (and its validation sums) for `platform` (module docstring)."""
    import jax

    findings = LoweringFindings()
    functional = FunctionalStep(workload.build(size, seed=seed), precision, seed, options)
    state = functional.initial_state()
    batch = host_batch_arrays(workload.synthetic_batch(size, batch_size, torch.Generator().manual_seed(seed)))
    state_specs = {name: jax.ShapeDtypeStruct(value.shape, value.dtype) for name, value in state.items()}
    batch_specs = {name: jax.ShapeDtypeStruct(value.shape, value.dtype) for name, value in batch.items()}
    lrs = jax.ShapeDtypeStruct((functional.group_count,), "float32")
    digests = set()
    def train_twice() -> None:
        for _ in range(2):
            exported = jax.export.export(jax.jit(functional.train), platforms=[platform])(state_specs, batch_specs, lrs)
            digests.add(hashlib.sha256(exported.mlir_module().encode()).hexdigest())

    def evaluate() -> None:
        jax.export.export(jax.jit(functional.evaluate), platforms=[platform])(state_specs, batch_specs)

    with _stand_ins_for_missing_ops(functional, findings):
        findings.untraceable = _traced(train_twice, "its training step") or _traced(evaluate, "its validation step")
    findings.programs_per_step = max(1, len(digests))
    return findings
