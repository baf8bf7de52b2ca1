"""Models of the kind users bring, written from docs/python.md alone: a small CNN with max pooling
and BatchNorm, and recurrent language models (LSTM and GRU) over byte tokens. Each is a workload
of plain PyTorch pieces (`trainspeed.workload_from`); the coverage script (model_coverage.py) and
the tests build them by these factories."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

import trainspeed

VOCABULARY, TOKENS = 256, 32


class SmallCNN(nn.Module):
    """Two conv-BN-ReLU-max-pool stages and a linear head, on 32x32 RGB images."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.norm2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.head = nn.Linear(32 * 8 * 8, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.norm1(self.conv1(images))), 2)
        x = F.max_pool2d(F.relu(self.norm2(self.conv2(x))), 2)
        return self.head(x.flatten(1))


class RecurrentLM(nn.Module):
    """Embedding, a 2-layer LSTM or GRU, and a head over the next byte."""

    def __init__(self, cell: str = "lstm", width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, width)
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(width, width, num_layers=2, batch_first=True)
        self.head = nn.Linear(width, VOCABULARY)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(tokens))
        return self.head(hidden)


def classification_loss(outputs: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return F.cross_entropy(outputs, batch[1])


def next_token_loss(outputs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs[:, :-1].reshape(-1, VOCABULARY), tokens[:, 1:].reshape(-1).long())


def small_cnn():
    return trainspeed.workload_from(
        model=SmallCNN, loss=classification_loss,
        optimizer=functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9),
        batch=(torch.rand(8, 3, 32, 32), torch.randint(0, 10, (8,))), name="user_cnn")


def lstm_lm():
    return trainspeed.workload_from(
        model=functools.partial(RecurrentLM, "lstm"), loss=next_token_loss,
        optimizer=functools.partial(torch.optim.AdamW, lr=3e-3),
        batch=torch.randint(0, VOCABULARY, (8, TOKENS)), name="user_lstm_lm")


def gru_lm():
    return trainspeed.workload_from(
        model=functools.partial(RecurrentLM, "gru"), loss=next_token_loss,
        optimizer=functools.partial(torch.optim.AdamW, lr=3e-3),
        batch=torch.randint(0, VOCABULARY, (8, TOKENS)), name="user_gru_lm")
