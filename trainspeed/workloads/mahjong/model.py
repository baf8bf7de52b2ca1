"""The Mahjong policy network: a GPT-style transformer over the 34 tile types.

An observation is an (86, 34) feature plane: 86 features for each of the 34 tile types (the
engine's 74 and 12 facts about tiles, `encoding.py`). Each tile type becomes one token (its 86
features projected to the model width, plus a learned position embedding), and the tokens pass
through pre-LN transformer blocks (self-attention and a GELU MLP, as in GPT-3). The mean-pooled
tokens give logits over the 82 actions, and each tile type's own token adds to the logits of the
actions on that type (discarding it, a kan of it), as a language model's head scores each token:
which tile to discard is decided where that tile's facts are, not squeezed through one pooled
vector (with the pooled head alone, a tiny model agreed with its teacher on 61% of held-out
decisions after 128k samples; with the tile logits, on 91%: docs/results/mahjong_learning.md). Illegal actions are masked out
before the softmax, and the loss is cross-entropy on the action that was taken.

Attention is bidirectional: tile types have no order in time, so there is no causal mask.

Speed switches (`PolicyConfig` fields after `dropout`) change how the same function is computed,
never what it computes; `policy_config("base+bf16-stream+pad-matmuls")` turns them on by name and
`VARIANTS` names tested combinations (`base-fast`). docs/results/gpu_speed.md says what each one is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from trainspeed.errors import UsageError
from trainspeed.workloads.qkv_attention import qkv_attention

NUM_TILE_TYPES = 34
NUM_FEATURES = 86
NUM_ACTIONS = 82
ILLEGAL_LOGIT = -1e9
TILE_ACTION_STARTS = (0, 42)
"""The action ids that follow the 34 tile types: discard of type t is id t, kan of type t is 42 + t."""
PADDED_ACTIONS = 128
"""The head's outputs with `pad_matmuls`: the next multiple of 64 above the 82 actions."""
PADDED_FEATURES = 96
"""The embedding's inputs with `pad_matmuls`: the next multiple of 16 above the 86 features."""

ATTENTION_KINDS = ("sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "explicit", "packed-heads",
                   "fused-qkv")
LANES = 128
"""A TPU vector register's lanes: the minor dimension of XLA's (8, 128) memory tiles."""
SDPA_BACKENDS = {
    "sdpa-math": SDPBackend.MATH,
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
}


@dataclass(frozen=True)
class PolicyConfig:
    width: int
    blocks: int
    heads: int
    mlp_ratio: int = 4
    dropout: float = 0.0
    # Speed switches: the same function, computed another way.
    bf16_stream: bool = False
    """Under bf16 autocast, keep the residual stream, the residual adds and the LayerNorms in bf16
    (autocast runs LayerNorm in fp32, so the stream between blocks is fp32 by default). The
    parameters stay fp32; LayerNorm still accumulates its statistics in fp32 inside the kernel.
    Without autocast it changes nothing."""
    attention: str = "sdpa"
    """"sdpa": PyTorch picks the scaled-dot-product backend (flash attention first on CUDA);
    "sdpa-math" / "sdpa-flash" / "sdpa-efficient" / "sdpa-cudnn": only that backend (an error
    where it cannot run); "explicit": q @ k^T, softmax, @ v written out (a compiler fuses the
    scale and softmax; nothing is padded to a kernel's tile of 64 or 128 tokens); "packed-heads":
    heads packed side by side into 128-lane groups, each group's scores and outputs one matmul
    against block-diagonal keys and values (`SelfAttention._attend_packed`; measured slower than
    the default on a TPU v5e, docs/tpu.md); "fused-qkv": the whole attention, head split and merge
    included, as one op on the q/k/v projection (`trainspeed.workloads.qkv_attention`), which the
    jax family lowers to a fused kernel on a TPU and every other target runs as "sdpa" does (no
    dropout)."""
    pad_matmuls: bool = False
    """Pad the head's 82 outputs to 128 (the padded logits are dropped before the mask and the
    loss) and the embedding's 86 inputs to 96 with zeros, so both matmuls have aligned shapes.
    The parameters keep their shapes; the padding is made from them in every forward."""
    compiled_optimizer: bool = False
    """Run AdamW's step through torch.compile (its foreach form, fused by Inductor) with a tensor
    learning rate, instead of the eager step (fused=True where the target asks for it)."""
    flat_tokens: bool = False
    """Carry the stream between the embedding and the final LayerNorm as (batch x 34 tokens, width)
    instead of (batch, 34, width): every Linear, LayerNorm and residual add works on a 2-D array,
    and only the attention sees each sample's tokens (a view of its q/k/v projection). XLA on a TPU
    lays an array's last two dimensions out in (8, 128) tiles, where 34 tokens fill 40 rows; before
    a weight-gradient matmul it copies a 3-D activation into a layout without that padding. A 2-D
    stream (64 x 34 = 2,176 rows) fills its tiles as it is."""

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention {self.attention!r}: choose one of {', '.join(ATTENTION_KINDS)}")
        if self.attention == "fused-qkv" and self.dropout:
            raise ValueError(f"attention 'fused-qkv' has no dropout: dropout {self.dropout} needs another attention")


SIZES: dict[str, PolicyConfig] = {
    "tiny": PolicyConfig(width=64, blocks=2, heads=2),
    "small": PolicyConfig(width=256, blocks=4, heads=4),
    "base": PolicyConfig(width=512, blocks=8, heads=8),
    "large": PolicyConfig(width=1024, blocks=16, heads=16),
}

SWITCHES: dict[str, dict[str, object]] = {
    "bf16-stream": {"bf16_stream": True},
    "pad-matmuls": {"pad_matmuls": True},
    "compiled-adamw": {"compiled_optimizer": True},
    "flat-tokens": {"flat_tokens": True},
    **{f"attn-{kind}": {"attention": kind} for kind in ATTENTION_KINDS},
}
"""The speed switches by name, as written after a size: `base+bf16-stream+attn-explicit`."""

VARIANTS: dict[str, str] = {
    "base-fast": "base+bf16-stream+pad-matmuls",
}
"""Named combinations of a size and switches (each name is also a size of the workload)."""


def policy_config(size: str) -> PolicyConfig:
    """A size name or a named variant, optionally followed by switches joined by `+`
    (`base-fast+attn-packed-heads`)."""
    first, *more = size.split("+")
    name, *switches = VARIANTS.get(first, first).split("+")
    switches += more
    if name not in SIZES:
        choices = ", ".join([*SIZES, *VARIANTS])
        raise UsageError(f"unknown mahjong size {size!r}; choose one of {choices}, optionally with +switches")
    config = SIZES[name]
    for switch in switches:
        if switch not in SWITCHES:
            raise UsageError(f"mahjong size {size!r}: unknown switch {switch!r}; choose from {', '.join(SWITCHES)}")
        config = replace(config, **SWITCHES[switch])
    return config


def _autocast_dtype(x: torch.Tensor) -> torch.dtype | None:
    device_type = x.device.type
    if device_type in ("cpu", "cuda", "xla", "xpu", "jax") and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return None


class StreamLayerNorm(nn.LayerNorm):
    """nn.LayerNorm that, given a low-precision input under autocast, runs in that precision
    (autocast would run it in fp32 and hand fp32 to the rest of the stream).

    The scale and shift are applied outside the normalisation kernel: their gradients are then
    sums that accumulate in fp32 on every device (the CPU's bf16 LayerNorm backward accumulates
    them in bf16, about 2% off). A compiler fuses the three ops into one kernel again."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 or _autocast_dtype(x) is None:
            return super().forward(x)
        with torch.autocast(x.device.type, enabled=False):
            normalized = F.layer_norm(x, self.normalized_shape, eps=self.eps)
            return torch.addcmul(self.bias.to(x.dtype), normalized, self.weight.to(x.dtype))


def heads_per_group(heads: int, dim: int) -> int:
    """The most heads of `dim` that divide `heads` and fit side by side in `LANES` (at least one)."""
    return max(size for size in range(1, heads + 1) if heads % size == 0 and size * dim <= max(LANES, dim))


def segment_softmax(scores: torch.Tensor, segments: int) -> torch.Tensor:
    """Softmax over each of `segments` equal runs of the last dimension, computed in that layout:
    masked maxima and sums instead of a view that splits the last dimension, which XLA would copy
    into another tiling. Each run is shifted by its own maximum, as softmax is."""
    length = scores.shape[-1] // segments
    owner = torch.arange(segments * length, device=scores.device) // length
    masks = [owner == segment for segment in range(segments)]
    maxima = [scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True) for mask in masks]
    exps = torch.exp(scores - _per_segment(masks, maxima).detach())
    sums = [exps.masked_fill(~mask, 0.0).sum(dim=-1, keepdim=True) for mask in masks]
    return exps / _per_segment(masks, sums)


def _per_segment(masks: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
    """Each segment's value (one per row) spread over that segment's positions."""
    spread = values[-1]
    for mask, value in zip(masks[:-1], values[:-1]):
        spread = torch.where(mask, value, spread)
    return spread


class SelfAttention(nn.Module):
    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)  # q, k and v in one matmul
        self.proj = nn.Linear(config.width, config.width)
        self.dropout = config.dropout
        self.attention = config.attention

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        dropout = self.dropout if self.training else 0.0
        if self.attention == "explicit":
            weights = ((q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)).softmax(dim=-1)
            if dropout:
                weights = F.dropout(weights, p=dropout)
            return weights @ v
        if self.attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=False)
        with sdpa_kernel(SDPA_BACKENDS[self.attention]):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=False)

    def _attend_packed(self, qkv: torch.Tensor) -> torch.Tensor:
        """Attention over heads packed side by side into `LANES`-wide groups (two heads of 64 for
        Mahjong base), computed per (sample, group) instead of per (sample, head).

        Each group's keys and values become block-diagonal: a row per (head, key), zero outside
        that head's lanes. One matmul of the group's queries with them gives every head's scores
        side by side, (queries, heads x keys), and one of the softmax weights with the values
        gives the heads' outputs already in their lanes: the tiles hold 68 of 128 score lanes
        and 128 of 128 output lanes, where one head's hold 34 and 64. The zeros add nothing to
        any sum, so the function is the same; the FLOPs reported stay the model's own count."""
        batch, tokens, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        dim = width // self.heads
        group = heads_per_group(self.heads, dim)
        groups, lanes = self.heads // group, group * dim
        q, k, v = (t.view(batch, tokens, groups, lanes).transpose(1, 2) for t in qkv.split(width, dim=2))
        head_of_lane = torch.arange(lanes, device=qkv.device) // dim
        zero = qkv.new_zeros(())
        k_rows = torch.cat([torch.where(head_of_lane == head, k, zero) for head in range(group)], dim=2)
        v_rows = torch.cat([torch.where(head_of_lane == head, v, zero) for head in range(group)], dim=2)
        scores = torch.einsum("bgqc,bgkc->bgqk", q, k_rows) * dim**-0.5  # (B, groups, Tq, group x Tk)
        weights = segment_softmax(scores, group)
        if self.training and self.dropout:
            weights = F.dropout(weights, p=self.dropout)
        y = torch.einsum("bgqk,bgkc->bqgc", weights, v_rows)  # (B, Tq, groups, lanes)
        return y.reshape(batch, tokens, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, tokens, width), or (batch x tokens, width) with `flat_tokens`."""
        qkv = self.qkv(x)
        if x.dim() == 2:
            mixed = self._mix(qkv.view(-1, NUM_TILE_TYPES, qkv.shape[-1]))
            return self.proj(mixed.reshape(x.shape))
        return self.proj(self._mix(qkv))

    def _mix(self, qkv: torch.Tensor) -> torch.Tensor:
        """The heads' outputs, (batch, tokens, width), from the q/k/v projection (batch, tokens, 3 x width)."""
        if self.attention == "packed-heads":
            return self._attend_packed(qkv)
        if self.attention == "fused-qkv":
            return qkv_attention(qkv, self.heads)
        batch, tokens, width = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
        q, k, v = qkv.split(width, dim=2)
        q, k, v = (t.view(batch, tokens, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        y = self._attend(q, k, v)
        return y.transpose(1, 2).reshape(batch, tokens, width)


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
        norm = StreamLayerNorm if config.bf16_stream else nn.LayerNorm
        self.ln_attn = norm(config.width)
        self.attn = SelfAttention(config)
        self.ln_mlp = norm(config.width)
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
        self.ln_final = (StreamLayerNorm if config.bf16_stream else nn.LayerNorm)(config.width)
        self.head = nn.Linear(config.width, NUM_ACTIONS)
        self.tile_head = nn.Linear(config.width, len(TILE_ACTION_STARTS))
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
        """Masked action logits (float32) for features (B, 86, 34) and legal mask (B, 82), and,
        given the chosen actions, the cross-entropy loss (inside forward, so a compiled network
        compiles the loss with it)."""
        tokens = features.to(self.embed.weight.dtype).transpose(1, 2)  # (B, 34 tile types, 86 features)
        position = self.position
        if self.config.bf16_stream and (dtype := _autocast_dtype(tokens)) is not None:
            position = position.to(dtype)  # else the fp32 parameter would promote the stream to fp32
        x = self._embed(tokens) + position
        if self.config.flat_tokens:
            x = x.reshape(-1, x.shape[-1])
        for block in self.blocks:
            x = block(x)
        x = self.ln_final(x).view(tokens.shape[0], NUM_TILE_TYPES, -1)
        logits = (self._head(x.mean(dim=1)) + self._tile_logits(x)).float().masked_fill(~mask, ILLEGAL_LOGIT)
        loss = F.cross_entropy(logits, action) if action is not None else None
        return logits, loss

    def _tile_logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 82) with each tile token's scores at its discard and kan ids, zero elsewhere."""
        per_tile = self.tile_head(x)  # (B, 34, 2)
        batch = x.shape[0]
        parts, position = [], 0
        for column, start in enumerate(TILE_ACTION_STARTS):
            parts.append(x.new_zeros(batch, start - position))
            parts.append(per_tile[..., column])
            position = start + NUM_TILE_TYPES
        parts.append(x.new_zeros(batch, NUM_ACTIONS - position))
        return torch.cat(parts, dim=1)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if not self.config.pad_matmuls:
            return self.embed(tokens)
        extra = PADDED_FEATURES - NUM_FEATURES
        return F.linear(F.pad(tokens, (0, extra)), F.pad(self.embed.weight, (0, extra)), self.embed.bias)

    def _head(self, pooled: torch.Tensor) -> torch.Tensor:
        if not self.config.pad_matmuls:
            return self.head(pooled)
        extra = PADDED_ACTIONS - NUM_ACTIONS
        weight = F.pad(self.head.weight, (0, 0, 0, extra))
        return F.linear(pooled, weight, F.pad(self.head.bias, (0, extra)))[:, :NUM_ACTIONS]


def forward_flops_per_sample(config: PolicyConfig) -> int:
    """Matmul FLOPs (multiply-add = 2) of one forward pass; elementwise ops are not counted.

    The model's own shapes are counted: `pad_matmuls` multiplies by padding zeros that are not."""
    tokens, width = NUM_TILE_TYPES, config.width
    embed = 2 * tokens * NUM_FEATURES * width
    per_block = tokens * (2 * width * 3 * width + 2 * width * width + 2 * 2 * width * config.mlp_ratio * width)
    attention = 2 * 2 * tokens * tokens * width  # scores q.k and the weighted sum of v
    head = 2 * width * NUM_ACTIONS + 2 * tokens * width * len(TILE_ACTION_STARTS)
    return embed + config.blocks * (per_block + attention) + head


def training_flops_per_sample(config: PolicyConfig) -> int:
    """Forward + backward: backward costs twice the forward, except the embedding, whose input
    (the observation) needs no gradient, so its backward is one weight-gradient matmul."""
    embed = 2 * NUM_TILE_TYPES * NUM_FEATURES * config.width
    return 3 * forward_flops_per_sample(config) - embed
