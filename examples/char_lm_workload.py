"""A byte-level transformer language model on real text, with bits per character as its own metric.

The text is the Python standard library's own sources, which every Python install has: each `.py`
file under `sysconfig.get_paths()["stdlib"]` is one document, cut into windows of WINDOW bytes
(a model of CONTEXT bytes predicts each next byte). Whole documents go to one side of the
train/val split, so validation is on files the model never saw. The metric is bits per byte of
the held-out files, which is bits per character for ASCII text (nearly all of these sources):
8 would be a uniform guess.

From nothing to a trained model and its metric (the folder holding this file must be importable):

    python examples/char_lm_workload.py text.npz --files 200             # tokens + document ids
    trainspeed data from-arrays text.npz --out data/text --split-by document --val-fraction 0.1
    trainspeed data verify data/text
    PYTHONPATH=examples trainspeed train --workload char_lm_workload:CharLMWorkload --size tiny \
        --data data/text --batch-size-per-device 32 --steps 300 --eval-every 100 --out runs/charlm

`runs/charlm/summary.json` then holds `"validation": {"bits_per_char": ..., "loss": ...}`, and
`metrics.jsonl` a `val` row with both at every `--eval-every`.
"""

from __future__ import annotations

import argparse
import math
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.data import open_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.data.loader import ShardLoader
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Batch, Trainable

VOCABULARY = 256
CONTEXT = 64
WINDOW = CONTEXT + 1
"""Bytes per sample: CONTEXT inputs, each predicting the byte after it."""
LEARNING_RATE = 2e-3


@dataclass(frozen=True)
class LMConfig:
    width: int
    layers: int
    heads: int


SIZES = {"tiny": LMConfig(width=64, layers=2, heads=4), "small": LMConfig(width=128, layers=4, heads=4)}


def stdlib_windows(files: int, file_bytes: int) -> dict[str, np.ndarray]:
    """Windows of WINDOW bytes from the first `files` standard-library sources (sorted by path, at
    most `file_bytes` of each), and the number of the file each came from."""
    root = Path(sysconfig.get_paths()["stdlib"])
    sources = sorted(p for p in root.rglob("*.py") if not {"site-packages", "dist-packages"} & set(p.parts))
    windows, documents = [], []
    for number, path in enumerate(sources[:files]):
        data = np.frombuffer(path.read_bytes()[:file_bytes], dtype=np.uint8)
        count = len(data) // WINDOW
        windows.append(data[: count * WINDOW].reshape(count, WINDOW))
        documents.append(np.full(count, number, dtype=np.uint32))
    return {"tokens": np.concatenate(windows), "document": np.concatenate(documents)}


class Block(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.attention_norm = nn.LayerNorm(config.width)
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.projection = nn.Linear(config.width, config.width)
        self.mlp_norm = nn.LayerNorm(config.width)
        self.mlp = nn.Sequential(nn.Linear(config.width, 4 * config.width), nn.GELU(),
                                 nn.Linear(4 * config.width, config.width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.projection(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.mlp_norm(x))


class CharTransformer(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, config.width)
        self.position = nn.Parameter(torch.randn(CONTEXT, config.width) * 0.02)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, VOCABULARY, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def inputs_and_targets(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows are stored as uint8 (a quarter of the bytes to copy); the model reads int64."""
    tokens = batch["tokens"].long()
    return tokens[:, :-1], tokens[:, 1:]


class CharLMTrainable(Trainable):
    def __init__(self, config: LMConfig) -> None:
        super().__init__({"lm": CharTransformer(config)})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"lm": torch.optim.AdamW(self.networks["lm"].parameters(), lr=LEARNING_RATE,
                                                   weight_decay=0.01, fused=fused or None)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        inputs, targets = inputs_and_targets(batch)
        logits = self.wrapped["lm"](inputs)
        loss = F.cross_entropy(logits.reshape(-1, VOCABULARY), targets.reshape(-1))
        loss.backward()
        self.optimizers["lm"].step()
        self.optimizers["lm"].zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Sums, so the trainer can add them over batches and ranks."""
        inputs, targets = inputs_and_targets(batch)
        logits = self.networks["lm"](inputs).float()
        return {"nats": F.cross_entropy(logits.reshape(-1, VOCABULARY), targets.reshape(-1), reduction="sum"),
                "characters": torch.tensor(targets.numel(), device=logits.device)}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        nats_per_character = float(totals["nats"]) / float(totals["characters"])
        return {"bits_per_char": nats_per_character / math.log(2), "loss": nats_per_character}


class CharLMWorkload:
    name = "charlm"
    version = "1"
    sizes = tuple(SIZES)
    default_size = "tiny"
    reference_batch = None
    """LEARNING_RATE is meant as set at the batches this example trains with (16 to 256): no scaling."""

    def build(self, size: str, seed: int = 0) -> CharLMTrainable:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return CharLMTrainable(SIZES[size])

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        return {"tokens": torch.randint(0, VOCABULARY, (batch_size, WINDOW), generator=generator, dtype=torch.uint8)}

    def flops_per_sample(self, size: str) -> float:
        """Training FLOPs of one window: 3x the forward's matmuls (a multiply-add is 2). Per layer
        and position: q, k, v and the projection 8 w^2, the MLP 16 w^2, attention scores and their
        weighted sum 4 T w (all T x T of them: the causal mask's masked half is computed too)."""
        config = SIZES[size]
        w, t = config.width, CONTEXT
        forward = t * (config.layers * (24 * w * w + 4 * t * w) + 2 * w * VOCABULARY)
        return 3.0 * forward

    def open_dataset(self, path: str, size: str, config: LoaderConfig) -> ShardLoader:
        """A dataset `trainspeed data from-arrays` (or `write_dataset`) made; its tokens must be windows
        of WINDOW bytes."""
        loader = open_dataset(path, config, outputs=("tokens",))
        dtype, shape = loader.spec.schema.columns["tokens"]
        if dtype != np.uint8 or shape != (WINDOW,):
            raise UsageError(f"{path}: tokens are {dtype} {shape}; charlm trains on uint8 windows of {WINDOW} bytes "
                             "(write them with examples/char_lm_workload.py)")
        return loader


def main() -> None:
    parser = argparse.ArgumentParser(description="Write standard-library text as windows for trainspeed data from-arrays.")
    parser.add_argument("out", type=Path, help=".npz file to write")
    parser.add_argument("--files", type=int, default=200, help="standard-library sources to read")
    parser.add_argument("--file-bytes", type=int, default=16384, help="bytes read from each at most")
    args = parser.parse_args()
    columns = stdlib_windows(args.files, args.file_bytes)
    np.savez(args.out, **columns)
    print(f"{args.out}: {len(columns['tokens'])} windows of {WINDOW} bytes from {len(np.unique(columns['document']))} files")


if __name__ == "__main__":
    main()
