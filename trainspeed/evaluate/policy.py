"""A trained network from a run directory, run for inference on a target.

`read_run_checkpoint` finds the run's checkpoint (as data: a checksum and torch's weights_only
loading, never a full unpickle) and checks it belongs to the expected workload; `NetworkRunner`
puts one of its networks on a target (device, precision, execution mode all come from the target)
and answers host batches with host outputs, one forward pass per call.
Targets that compile a graph per input shape get batches padded to a power of two, so an
evaluation compiles a handful of graphs instead of one per batch size it meets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from trainspeed.errors import UsageError
from trainspeed.targets.base import Target
from trainspeed.train.checkpoint import (
    PayloadCheck,
    checkpoint_dir,
    checkpoint_name,
    find_checkpoint,
    load_checkpoint,
    step_files,
)
from trainspeed.train.config import TrainConfig
from trainspeed.train.resume import check_checkpoint, checkpoint_config
from trainspeed.workloads import get_workload

HostBatch = dict[str, np.ndarray]
Forward = Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]
"""How to call the network on a device batch; returns the output to bring back to the host."""


@dataclass(frozen=True)
class RunCheckpoint:
    """What an evaluation needs from a run directory's latest checkpoint."""

    run_dir: Path
    checkpoint: Path
    workload: str
    size: str
    step: int
    seed: int
    """The training run's seed (initial weights, data order), not any evaluation's."""
    global_batch: int
    """Samples per step of the training run, so step x global_batch samples were seen."""
    networks: dict[str, dict[str, Any]]
    """Network name -> state dict (host tensors)."""


def read_run_checkpoint(run_dir: str | Path, workload: str, flag: str, step: int | None = None) -> RunCheckpoint:
    """The checkpoint of `run_dir` a resume would continue from (the one `latest` names, else the
    newest valid one, saying so), or that of `step`; UsageError naming `flag` when there is none,
    when it was trained on another workload, or when it does not fit what its own settings build
    (`trainspeed.train.resume.check_checkpoint`: its step against its name, every network tensor).
    Checkpoints are read as data only (`load_checkpoint`), and only from regular files."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UsageError(f"{flag} {run_dir}: no such run directory")

    def check(checkpoint: Path, payload: dict[str, Any]) -> TrainConfig:
        config = checkpoint_config(checkpoint, payload)
        if config.workload != workload:
            raise UsageError(f"{flag} {run_dir}: its checkpoint is a {config.workload!r} run, not {workload!r}")
        return check_checkpoint(checkpoint, payload)

    try:
        if step is not None:
            checkpoint = checkpoint_dir(path) / checkpoint_name(step)
            if not checkpoint.exists() and not checkpoint.is_symlink():
                kept = ", ".join(str(found) for found, _ in sorted(step_files(path))) or "none"
                raise UsageError(f"{flag} {run_dir} --step {step}: no checkpoint of that step (kept: {kept}; "
                                 "train with --keep-checkpoints 0 to keep every one)")
            payload = load_checkpoint(checkpoint)
            config = check(checkpoint, payload)
        else:
            checkpoint, payload = _latest_valid(path, flag, run_dir, check)
            config = checkpoint_config(checkpoint, payload)
    except UsageError as error:
        message = str(error)
        raise UsageError(message if message.startswith(flag) else f"{flag} {run_dir}: {message}") from None
    return RunCheckpoint(run_dir=path, checkpoint=checkpoint, workload=config.workload, size=config.size,
                         step=payload["step"], seed=config.seed, global_batch=config.global_batch,
                         networks=payload["trainable"]["networks"])


def _latest_valid(path: Path, flag: str, run_dir: str | Path, check: PayloadCheck) -> tuple[Path, dict[str, Any]]:
    found = find_checkpoint(path, check)
    if found is None:
        raise UsageError(f"{flag} {run_dir}: holds no checkpoint (checkpoints/latest); "
                         "give the --out directory of a finished `trainspeed train` run")
    if found.skipped:
        print(f"{flag} {run_dir}: {'; '.join(found.skipped)}; evaluating {found.path.name}, the newest valid "
              "checkpoint", flush=True)
    return found.path, found.payload


def build_network(run: RunCheckpoint, name: str) -> nn.Module:
    """Network `name` of the run's workload at the run's size, with the checkpoint's weights, on the host."""
    trainable = get_workload(run.workload).build(run.size, seed=0)
    network = trainable.networks[name]
    network.load_state_dict(run.networks[name])
    return network.eval()


def padded_rows(rows: int) -> int:
    """The next power of two: few distinct shapes for targets that compile one graph per shape."""
    return 1 << max(0, rows - 1).bit_length()


class NetworkRunner:
    """One network on a target, for inference: host arrays in, one forward pass, host array out.

    Keeps the seconds spent per call (copies in, forward, device sync through the copy back)."""

    def __init__(self, network: nn.Module, target: Target, forward: Forward) -> None:
        self.target = target
        self.forward = forward
        target.configure_precision()
        network.to(target.device)
        network.eval()
        for parameter in network.parameters():
            parameter.requires_grad_(False)
        self.network = target.wrap_network(network)
        self.pad = target.fixed_shapes
        self.seconds = 0.0
        self.calls = 0
        self.rows = 0

    def __call__(self, batch: HostBatch) -> np.ndarray:
        started = time.perf_counter()
        rows = len(next(iter(batch.values())))
        host = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in batch.items()}
        if self.pad and padded_rows(rows) != rows:
            extra = padded_rows(rows) - rows
            host = {name: torch.cat([tensor, tensor[:1].expand(extra, *tensor.shape[1:])])
                    for name, tensor in host.items()}
        device_batch = self.target.move_batch(host)
        with torch.no_grad(), self.target.autocast():
            output = self.forward(self.network, device_batch)
        self.target.after_step()
        result = output[:rows].float().cpu().numpy()
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.rows += rows
        return result
