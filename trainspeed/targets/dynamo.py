"""torch.compile support shared by the CPU and CUDA families (dynamo is device-independent)."""

from __future__ import annotations

import torch


def compile_network(
    network: torch.nn.Module, mode: str | None = None, options: dict[str, object] | None = None
) -> torch.nn.Module:
    """Compile with static shapes: every batch size of a sweep gets its own specialised graph.
    `options` are inductor settings (torch.compile takes them or a `mode`, not both)."""
    if options:
        return torch.compile(network, dynamic=False, options=options)
    return torch.compile(network, mode=mode, dynamic=False)


def dynamo_compile_count() -> int:
    """Frames dynamo has compiled so far, first compiles and recompiles alike."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])


def reset_dynamo() -> None:
    torch._dynamo.reset()
