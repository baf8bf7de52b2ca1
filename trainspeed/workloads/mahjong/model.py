"""The Mahjong policy network: a GPT-style transformer over the 34 tile types.

An observation is a (74, 34) feature plane: 74 features for each of the 34 tile types. Each tile
type becomes one token (its 74 features projected to the model width, plus a learned position
embedding), the tokens pass through pre-LN transformer blocks (self-attention and a GELU MLP, as
in GPT-3), and the mean-pooled tokens give logits over the 82 actions. Illegal actions are masked
out before the softmax, and the loss is cross-entropy on the action that was taken.

Attention is bidirectional: tile types have no order in time, so there is no causal mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

NUM_TILE_TYPES = 34
NUM_FEATURES = 74
NUM_ACTIONS = 82
ILLEGAL_LOGIT = -1e9


@dataclass(frozen=True)
class PolicyConfig:
    width: int
    blocks: int
    heads: int
    mlp_ratio: int = 4
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")


SIZES: dict[str, PolicyConfig] = {
    "tiny": PolicyConfig(width=64, blocks=2, heads=2),
    "small": PolicyConfig(width=256, blocks=4, heads=4),
    "base": PolicyConfig(width=512, blocks=8, heads=8),
    "large": PolicyConfig(width=1024, blocks=16, heads=16),
}


class SelfAttention(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, tokens, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=False)
        return self.proj(y.transpose(1, 2).reshape(batch, tokens, width))


class MLP(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        hidden = config.mlp_ratio * config.width
        self.fc = nn.Linear(config.width, hidden)
        self.proj = nn.Linear(hidden, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.width)
        self.attn = SelfAttention(config)
        self.ln_mlp = nn.LayerNorm(config.width)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class MahjongPolicy(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Linear(NUM_FEATURES, config.width)
        self.position = nn.Parameter(torch.zeros(1, NUM_TILE_TYPES, config.width))
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.blocks))
        self.ln_final = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, NUM_ACTIONS)
        self.apply(self._init_weights)
        # GPT-2's scaled init of the residual projections keeps the residual stream's variance flat.
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.blocks))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            nn.init.zeros_(module.bias)

    def forward(
        self, features: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Masked action logits (float32) for features (B, 74, 34) and legal mask (B, 82), and,
        given the chosen actions, the cross-entropy loss (inside forward, so a compiled network
        compiles the loss with it)."""
        tokens = features.to(self.embed.weight.dtype).transpose(1, 2)  # (B, 34 tile types, 74 features)
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_final(x).mean(dim=1)).float().masked_fill(~mask, ILLEGAL_LOGIT)
        loss = F.cross_entropy(logits, action) if action is not None else None
        return logits, loss


def forward_flops_per_sample(config: PolicyConfig) -> int:
    """Matmul FLOPs (multiply-add = 2) of one forward pass; elementwise ops are not counted."""
    tokens, width = NUM_TILE_TYPES, config.width
    embed = 2 * tokens * NUM_FEATURES * width
    per_block = tokens * (2 * width * 3 * width + 2 * width * width + 2 * 2 * width * config.mlp_ratio * width)
    attention = 2 * 2 * tokens * tokens * width  # scores q.k and the weighted sum of v
    head = 2 * width * NUM_ACTIONS
    return embed + config.blocks * (per_block + attention) + head


def training_flops_per_sample(config: PolicyConfig) -> int:
    """Forward + backward: backward costs twice the forward, except the embedding, whose input
    (the observation) needs no gradient, so its backward is one weight-gradient matmul."""
    embed = 2 * NUM_TILE_TYPES * NUM_FEATURES * config.width
    return 3 * forward_flops_per_sample(config) - embed
