"""A gradient with respect to a step's inputs, itself differentiable (a gradient penalty such as
StyleGAN's R1): the one place a workload's step differentiates something other than its loss.

On torch targets it is `torch.autograd.grad(..., create_graph=True)`. The jax family has no
autograd to call: while it traces a step it installs its own way (`jax.grad` of the function),
so a workload that asks through here runs unchanged on every target.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator

import torch

InputGradient = Callable[[Callable[[torch.Tensor], torch.Tensor], torch.Tensor], torch.Tensor]

_installed: contextvars.ContextVar[InputGradient | None] = contextvars.ContextVar("input_gradient", default=None)


def input_gradient(function: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    """d sum(function(inputs)) / d inputs, in a graph that the step's own backward differentiates again."""
    installed = _installed.get()
    if installed is not None:
        return installed(function, inputs)
    leaf = inputs.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(function(leaf).sum(), leaf, create_graph=True)
    return gradient


@contextlib.contextmanager
def installed(way: InputGradient) -> Iterator[None]:
    """`input_gradient` computed by `way` inside this block (a traced target's own differentiation)."""
    token = _installed.set(way)
    try:
        yield
    finally:
        _installed.reset(token)
