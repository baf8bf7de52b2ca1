"""Plain-PyTorch reference peer: the Mahjong policy net and its training step, written by hand.

Nothing here comes from trainspeed's model, targets or timing: the network is written from its
description (34 tile-type tokens of 86 features, pre-LN transformer blocks, mean pool plus per-tile logits, 82 masked
action logits, cross-entropy; AdamW), so a trainspeed row next to this peer's row compares the
harness against an independent implementation of the same work. Only the result schema is
shared (see common.py), so both kinds of rows go into one JSONL and one `trainspeed plot`.

    python benchmarks/reference/plain_torch.py --size tiny --batch-sizes 2^6..2^10 --threads 1 \\
        --out results/peers.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file: import this checkout's packages (benchmarks, trainspeed), not an installed copy.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import contextlib
import gc
import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.reference.common import (
    ADAM_EPS,
    BETAS,
    ILLEGAL_LOGIT,
    INIT_STD,
    LAYER_NORM_EPS,
    LEARNING_RATE,
    MLP_RATIO,
    NUM_ACTIONS,
    NUM_FEATURES,
    NUM_TILE_TYPES,
    TILE_ACTION_STARTS,
    SIZES,
    WEIGHT_DECAY,
    Measurement,
    NetSize,
    PeerConfig,
    UsageError,
    build_parser,
    cpu_model_name,
    run_main,
    synthetic_batch,
    time_windows,
)

PROG = "plain_torch.py"
HOST_OOM_MARKERS = ("can't allocate memory", "not enough memory", "std::bad_alloc")


# --- the network ------------------------------------------------------------------------------


class Attention(nn.Module):
    """Bidirectional multi-head self-attention with one fused q/k/v projection."""

    def __init__(self, size: NetSize) -> None:
        super().__init__()
        self.heads = size.heads
        self.qkv = nn.Linear(size.width, 3 * size.width)
        self.out = nn.Linear(size.width, size.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        # (batch, tokens, q|k|v, heads, head_dim) -> three (batch, heads, tokens, head_dim)
        q, k, v = self.qkv(x).view(batch, tokens, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(batch, tokens, width))


class Block(nn.Module):
    """Pre-LN transformer block: x + attention(LN(x)), then x + MLP(LN(x)) with tanh-GELU."""

    def __init__(self, size: NetSize) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(size.width, eps=LAYER_NORM_EPS)
        self.attn = Attention(size)
        self.norm2 = nn.LayerNorm(size.width, eps=LAYER_NORM_EPS)
        self.mlp_in = nn.Linear(size.width, MLP_RATIO * size.width)
        self.mlp_out = nn.Linear(MLP_RATIO * size.width, size.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.norm2(x)), approximate="tanh"))


class PolicyNet(nn.Module):
    """Tile-type tokens -> blocks -> final LN -> mean over tokens -> masked action logits (+ loss).

    The loss is computed inside forward so that `--compile` compiles it with the network.
    """

    def __init__(self, size: NetSize) -> None:
        super().__init__()
        self.tile_embed = nn.Linear(NUM_FEATURES, size.width)
        self.pos_embed = nn.Parameter(torch.zeros(1, NUM_TILE_TYPES, size.width))
        self.layers = nn.ModuleList(Block(size) for _ in range(size.blocks))
        self.norm_out = nn.LayerNorm(size.width, eps=LAYER_NORM_EPS)
        self.policy_head = nn.Linear(size.width, NUM_ACTIONS)
        self.tile_head = nn.Linear(size.width, len(TILE_ACTION_STARTS))
        residual_std = INIT_STD / math.sqrt(2 * size.blocks)  # GPT-2: residual projections scaled down
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=INIT_STD)
                nn.init.zeros_(module.bias)
        for layer in self.layers:
            nn.init.normal_(layer.attn.out.weight, std=residual_std)
            nn.init.normal_(layer.mlp_out.weight, std=residual_std)

    def forward(
        self, features: torch.Tensor, mask: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """features (B, 86, 34) of any float dtype (taken in the weights' dtype, as trainspeed's
        net takes its float16 batches), legal mask (B, 82) bool, action (B,) -> float32 logits, mean loss."""
        x = self.tile_embed(features.to(self.tile_embed.weight.dtype).transpose(1, 2)) + self.pos_embed
        for layer in self.layers:
            x = layer(x)
        x = self.norm_out(x)
        logits = self.policy_head(x.mean(dim=1))
        per_tile = self.tile_head(x)  # (B, 34, 2): each tile's discard and kan scores
        for column, start in enumerate(TILE_ACTION_STARTS):
            logits = torch.cat([logits[:, :start], logits[:, start:start + NUM_TILE_TYPES] + per_tile[..., column],
                                logits[:, start + NUM_TILE_TYPES:]], dim=1)
        logits = logits.float()
        logits = logits.masked_fill(~mask, ILLEGAL_LOGIT)
        return logits, F.cross_entropy(logits, action)


def flops_per_sample(net: PolicyNet) -> int:
    """Training matmul FLOPs per sample, counted from this net's own layers (multiply-add = 2).

    Every Linear runs once per token, except the head, which runs once on the pooled vector;
    attention adds q.k^T and weights.v per block. Backward costs twice the forward, except that
    the observation needs no gradient, so the embedding's input-gradient matmul is not run.
    """
    tokens = NUM_TILE_TYPES
    forward = 0
    for module in net.modules():
        if isinstance(module, nn.Linear):
            rows = 1 if module is net.policy_head else tokens
            forward += 2 * rows * module.in_features * module.out_features
    for layer in net.layers:
        width = layer.attn.out.in_features
        forward += 2 * (2 * tokens * tokens * width)
    embed_input_gradient = 2 * tokens * net.tile_embed.in_features * net.tile_embed.out_features
    return 3 * forward - embed_input_gradient


def flops_for_size(size: str) -> int:
    """FLOPs per sample of a size, counted on a net built on the meta device (no memory)."""
    with torch.device("meta"):
        return flops_per_sample(PolicyNet(SIZES[size]))


# --- the peer -------------------------------------------------------------------------------------


def dynamo_frames_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["frames"]["ok"])


class TorchPeer:
    """The hand-written net + AdamW on one device, eager or torch.compile, fp32 or bf16 autocast."""

    def __init__(self, config: PeerConfig) -> None:
        if config.device == "cuda" and not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device here (torch.cuda.is_available() is False)")
        if config.threads:
            torch.set_num_threads(config.threads)
        self.config = config
        self.device = torch.device(config.device)
        if self.device.type == "cuda":
            # fp32 means true fp32 matmuls, as trainspeed's cuda:*:fp32 targets do.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        mode = "compile" if config.compile else "eager"
        self.target = f"reference-torch:{config.device}:{mode}:{config.precision}"
        self.threads = torch.get_num_threads()
        self.device_name = (
            torch.cuda.get_device_name(self.device)
            if self.device.type == "cuda"
            else f"{cpu_model_name()} ({self.threads} threads)"
        )
        self.torch_version = torch.__version__
        self.flops_per_sample = flops_for_size(config.size)
        fused = self.device.type == "cuda"
        self.extra: dict[str, Any] = {
            "implementation": "benchmarks/reference/plain_torch.py",
            "precision_detail": (
                "torch.autocast bf16 around forward and loss; fp32 parameters and AdamW state"
                if config.precision == "bf16"
                else "fp32" + (" (TF32 off)" if fused else "")
            ),
            "optimizer": f"torch.optim.AdamW(lr={LEARNING_RATE}, betas={BETAS}, weight_decay={WEIGHT_DECAY}, "
            f"eps={ADAM_EPS}{', fused=True' if fused else ''})",
        }

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.config.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _free_memory(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)

    def measure(self, batch_size: int) -> Measurement:
        """Build net, optimizer and one batch afresh (a compiled net compiles for this batch size), time it."""
        if self.config.compile:
            torch._dynamo.reset()
        self._free_memory()
        torch.manual_seed(self.config.seed)
        net = PolicyNet(self.config.net_size).to(self.device)
        optimizer = torch.optim.AdamW(
            net.parameters(),
            lr=LEARNING_RATE,
            betas=BETAS,
            weight_decay=WEIGHT_DECAY,
            eps=ADAM_EPS,
            fused=True if self.device.type == "cuda" else None,
        )
        model = torch.compile(net, dynamic=False) if self.config.compile else net
        host = synthetic_batch(batch_size, self.config.seed)
        features = torch.from_numpy(host.features).to(self.device)
        mask = torch.from_numpy(host.mask).to(self.device)
        action = torch.from_numpy(host.action).to(self.device)

        def step() -> torch.Tensor:
            with self._autocast():
                _, loss = model(features, mask, action)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.detach()

        def finish(loss: torch.Tensor) -> float:
            self._sync()
            return float(loss)

        compile_count = dynamo_frames_compiled if self.config.compile else (lambda: 0)
        timing = time_windows(step, finish, self.config.plan, compile_count)
        peak = int(torch.cuda.max_memory_allocated(self.device)) if self.device.type == "cuda" else None
        return Measurement(timing=timing, peak_memory_bytes=peak)

    def is_oom(self, error: BaseException) -> bool:
        if isinstance(error, (MemoryError, torch.cuda.OutOfMemoryError)):
            return True
        text = str(error)
        return "CUDA out of memory" in text or any(marker in text for marker in HOST_OOM_MARKERS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(
        PROG,
        "Plain-PyTorch reference peer: time the hand-written Mahjong policy net's training step.",
        compile_help="torch.compile the network and loss (static shapes, recompiled per batch size)",
    )
    return run_main(PROG, argv, parser, TorchPeer)


if __name__ == "__main__":
    sys.exit(main())
