"""`trainspeed eval mahjong-agreement`: how often a trained policy picks its teacher's action, per
kind of decision, on held-out games, and what its wrong discards cost.

The samples are the dataset's own (the teacher's recorded choices); the policy answers each with
its most likely legal action. `trainspeed.workloads.mahjong.decisions` defines the kinds and the
discard errors; this module runs the network over the split and writes the row.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import numpy as np
import torch

from trainspeed.atomic import check_writable_directory
from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.evaluate.config import MahjongAgreementConfig
from trainspeed.evaluate.mahjong_network import WORKLOAD, network_player
from trainspeed.user_json import check_rows_file
from trainspeed.evaluate.policy import read_run_checkpoint
from trainspeed.evaluate.rows import MahjongAgreementRow
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.targets import get_target, target_family
from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import identify
from trainspeed.workloads.mahjong.decisions import AgreementTable


def _chosen_actions(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, logits, -np.inf).argmax(axis=1)


def run_agreement(config: MahjongAgreementConfig, command: str) -> MahjongAgreementRow:
    config.validate()
    check_rows_file(Path(config.out), f"--out {config.out}", kinds=(MahjongAgreementRow.KIND,))
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    policy = read_run_checkpoint(config.policy, WORKLOAD, "--policy", config.policy_step)
    target_family(config.target)
    out = Path(config.out)
    check_writable_directory(out.parent, f"--out {out}")
    if not Path(config.data).is_dir():
        raise UsageError(f"eval mahjong-agreement: --data {config.data}: no such folder")
    loader = get_workload(WORKLOAD).open_dataset(config.data, policy.size, LoaderConfig(
        batch_size=config.batch_size, split=config.split, num_workers=0, shuffle=False, drop_last=False))
    if loader.num_samples == 0:
        raise UsageError(f"eval mahjong-agreement: --data {config.data} holds no {config.split} samples")
    player, _ = network_player(policy, get_target(config.target))
    machine = Machine.at_start()
    table = AgreementTable()
    started = time.perf_counter()
    for batch in loader:
        features = batch["features"].numpy()
        mask = batch["mask"].numpy()
        logits = player.logits(features, mask)
        table.add(features, batch["action"].numpy(), _chosen_actions(logits, mask))
    row = MahjongAgreementRow(
        timestamp=datetime.datetime.now().isoformat(timespec="seconds"),
        policy=config.policy or "", policy_size=policy.size, policy_step=policy.step,
        data=str(config.data), split=config.split, samples=table.total, agreement=table.agreement(),
        samples_per_kind=table.samples, discard_errors=table.discard_errors,
        folding_samples=table.folding_samples, chosen_kinds=table.chosen_kinds,
        target=config.target, threads=torch.get_num_threads(), wall_s=time.perf_counter() - started,
        **identify(get_workload(WORKLOAD)).provenance(command, machine.at_end()).fields_of(MahjongAgreementRow))
    append_row(out, row)
    return row
