"""`F.conv{1,2,3}d` and `F.conv_transpose{1,2,3}d` as functions torchax dispatches, so that its
autocast casts their arguments before PyTorch's own checks see them.

torchax has no lowering of these functions: it runs PyTorch's, which checks that input, weight and
bias share a dtype before the `aten.convolution` they call reaches torchax, where the autocast
policy would cast them. Under bf16 a convolution whose input is already bfloat16 (the output of a
bf16 layer before it: a squeeze-and-excitation block's 1x1 convolutions) beside a float32 weight
and bias failed there. As torchax's ops here, they take the lower-precision policy first
(`functional._torch_autocast_policies`) and then run PyTorch's function as it is, on arguments of
one dtype.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

TORCH_LEVEL = True
"""These run PyTorch's own function on torchax tensors; torchax lowers the aten ops it calls."""

FUNCTIONS = (F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)


def _as_pytorch_runs_it(function: Callable[..., Any]) -> Callable[..., Any]:
    """PyTorch's `function` on its arguments, each torchax tensor wrapped anew around its array:
    PyTorch checks the dtypes its wrapper recorded, and a parameter rebound to another array while
    tracing (`bf16-compute`'s bfloat16 copies) keeps the dtype it was made with."""
    from torch.utils import _pytree as pytree
    from torchax.tensor import Tensor

    def run(*args: Any, env: Any, **kwargs: Any) -> Any:
        args, kwargs = pytree.tree_map_only(Tensor, lambda tensor: Tensor(tensor._elem, env), (args, kwargs))
        with torch._C.DisableTorchFunctionSubclass():  # else it would come back here
            return function(*args, **kwargs)
    run.needs_env = True  # type: ignore[attr-defined]
    return run


def lowerings() -> dict[Any, Callable[..., Any]]:
    return {function: _as_pytorch_runs_it(function) for function in FUNCTIONS}
