"""What the peers' checks share: trainspeed's net with perturbed weights, its parameter names in
the plain-PyTorch peer, a synthetic batch."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from trainspeed.workloads.mahjong.model import SIZES as TRAINSPEED_SIZES
from trainspeed.workloads.mahjong.model import MahjongPolicy
from trainspeed.workloads.mahjong.workload import MahjongWorkload

ROOT = Path(__file__).resolve().parents[2]
ALL_SIZES = ("tiny", "small", "base", "large")

# trainspeed's parameter names -> plain_torch.py's: the same tensors under other names.
PLAIN_TORCH_NAMES = [
    (r"^position$", "pos_embed"),
    (r"^embed\.", "tile_embed."),
    (r"^blocks\.", "layers."),
    (r"\.ln_attn\.", ".norm1."),
    (r"\.attn\.proj\.", ".attn.out."),
    (r"\.ln_mlp\.", ".norm2."),
    (r"\.mlp\.fc\.", ".mlp_in."),
    (r"\.mlp\.proj\.", ".mlp_out."),
    (r"^ln_final\.", "norm_out."),
    (r"^head\.", "policy_head."),
    (r"^tile_head\.", "tile_head."),
]


def plain_torch_name(name: str) -> str:
    for pattern, replacement in PLAIN_TORCH_NAMES:
        name = re.sub(pattern, replacement, name)
    return name


def trainspeed_policy(size: str) -> MahjongPolicy:
    """trainspeed's net with every parameter perturbed, so LayerNorm gains and the (zero-initialised)
    position embedding matter too and a peer that drops or misplaces one cannot match."""
    torch.manual_seed(0)
    policy = MahjongPolicy(TRAINSPEED_SIZES[size])
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return policy


def sorted_shapes(shapes) -> list[tuple[int, ...]]:
    return sorted(tuple(shape) for shape in shapes)


def batch(batch_size: int = 16):
    return MahjongWorkload().synthetic_batch("tiny", batch_size, torch.Generator().manual_seed(1))
