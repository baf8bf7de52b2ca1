"""`trainspeed eval mahjong`: a trained Mahjong policy in duplicate 1-vs-3 games, resumable.

The policy (a run directory's latest checkpoint) plays every deal four times, once in each seat,
against three copies of the opponent: the rule-based agent, the random agent, or another run's
policy (`trainspeed.workloads.mahjong.duplicate` has the format and the fixed deal seeds). Its
network runs on a target, every pending decision of a pool step in one forward pass.

Progress: each finished deal is appended as one line to `OUT.progress` (the settings are its
first line). A rerun with the same settings skips the deals found there; a rerun with other
settings is refused while that file holds an unfinished evaluation. When every deal is played, the
result row is appended to OUT and the progress file is removed.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
import uuid
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from trainspeed.atomic import append_line, atomic_write_text, check_writable_directory, create_exclusive_text
from trainspeed.errors import UsageError
from trainspeed.evaluate.config import MahjongEvalConfig
from trainspeed.evaluate.mahjong_network import WORKLOAD
from trainspeed.evaluate.play import play_deals
from trainspeed.evaluate.policy import RunCheckpoint, read_run_checkpoint
from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.machine import Machine
from trainspeed.rows import append_row
from trainspeed.stats import clustered_mean, within_cluster_correlation
from trainspeed.targets import target_family
from trainspeed.user_json import JSONRefused, check_rows_file, loads, read_utf8
from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import identify
from trainspeed.workloads.mahjong.duplicate import (
    ROTATIONS,
    DealResult,
    PoolTimes,
    deal_seed,
)

PROGRESS_FORMAT = 1


def engine_version() -> str:
    try:
        return f"riichienv {version('riichienv')}"
    except PackageNotFoundError:
        return "riichienv (version unknown)"


def _run_identity(run: RunCheckpoint) -> dict[str, Any]:
    return {"run": str(run.run_dir.resolve()), "checkpoint": run.checkpoint.name, "step": run.step}


def evaluation_settings(config: MahjongEvalConfig, policy: RunCheckpoint,
                        opponent: RunCheckpoint | None) -> dict[str, Any]:
    """What must match for a rerun to continue an unfinished evaluation (the pool size and the
    thread count change no result, so they may differ)."""
    return {
        "format": PROGRESS_FORMAT,
        "policy": _run_identity(policy),
        "opponent": config.opponent if opponent is None else _run_identity(opponent),
        "games": config.games,
        "seed": config.seed,
        "temperature": config.temperature,
        "target": config.target,
        "engine": engine_version(),
    }


def _differences(before: dict[str, Any], now: dict[str, Any]) -> str:
    keys = [key for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key)]
    return ", ".join(f"{key} {before.get(key)!r} -> {now.get(key)!r}" for key in keys)


class ProgressFile:
    """`OUT.progress`: a settings line, then one line per finished deal, appended whole."""

    def __init__(self, path: Path, eval_id: str, done: dict[int, DealResult]) -> None:
        self.path = path
        self.eval_id = eval_id
        self.done = done

    @classmethod
    def open(cls, path: Path, settings: dict[str, Any], out: Path, deals: int, seed: int) -> "ProgressFile":
        """Continue the unfinished evaluation in `path` if it has these settings; start a new one if
        there is none (or the one there already reached OUT); refuse one with other settings."""
        if path.exists():
            header, done = _read_progress(path, deals, seed)
            if _row_recorded(out, header["eval_id"]):
                path.unlink()  # finished earlier; stopped before its progress file was removed
            elif header["settings"] != settings:
                raise UsageError(
                    f"eval mahjong: {path} holds an unfinished evaluation with other settings "
                    f"({_differences(header['settings'], settings)}); rerun it with its settings to finish "
                    "it, or delete that file or choose another --out")
            else:
                return cls(path, header["eval_id"], done)
        eval_id = uuid.uuid4().hex[:12]
        header = {"kind": "settings", "eval_id": eval_id, "settings": settings,
                  "started": datetime.datetime.now().isoformat(timespec="seconds")}
        create_exclusive_text(path, json.dumps(header, sort_keys=True) + "\n", f"eval mahjong: {path}")
        return cls(path, eval_id, {})

    def append(self, result: DealResult) -> None:
        append_line(self.path, json.dumps({"kind": "deal", **dataclasses.asdict(result)}))
        self.done[result.deal] = result

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _read_progress(path: Path, deals: int, seed: int) -> tuple[dict[str, Any], dict[int, DealResult]]:
    """The header and the finished deals. A last line cut short by a crash is dropped (the file
    is rewritten without it); damage anywhere else is refused."""
    text = read_utf8(path, f"eval mahjong: {path}")
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            rows.append(loads(line))
        except JSONRefused:
            if number == len(lines) and not text.endswith("\n") and number > 1:
                atomic_write_text(path, "".join(item + "\n" for item in lines[:-1]))
                break
            raise UsageError(f"eval mahjong: {path}: line {number} is damaged; delete the file to start "
                             "the evaluation over") from None
    if not rows or not isinstance(rows[0], dict) or rows[0].get("kind") != "settings" or "settings" not in rows[0]:
        raise UsageError(f"eval mahjong: {path} is not a progress file of `trainspeed eval mahjong`; "
                         "delete it or choose another --out")
    done: dict[int, DealResult] = {}
    for number, row in enumerate(rows[1:], start=2):
        try:
            result = DealResult(deal=int(row["deal"]), seed=int(row["seed"]), ranks=tuple(row["ranks"]),
                                score_deltas=tuple(row["score_deltas"]), decisions=int(row["decisions"]))
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"eval mahjong: {path}: line {number} is not a finished deal; delete the file to "
                             "start the evaluation over") from None
        if 0 <= result.deal < deals and result.seed == deal_seed(seed, result.deal):
            done[result.deal] = result
    return rows[0], done


def _row_recorded(out: Path, eval_id: str) -> bool:
    if not out.exists():
        return False
    with open(out, encoding="utf-8") as handle:
        for line in handle:
            try:
                if loads(line).get("eval_id") == eval_id:
                    return True
            except (JSONRefused, AttributeError):
                continue
    return False


def _ci(values: tuple[float, float] | None) -> list[float] | None:
    return None if values is None else [values[0], values[1]]


def summarize(config: MahjongEvalConfig, command: str, eval_id: str, device_name: str,
              policy: RunCheckpoint, opponent: RunCheckpoint | None,
              results: list[DealResult], played: PoolTimes, wall_s: float, cpu_s: float,
              machine: Machine) -> MahjongEvalRow:
    """The row: means with intervals clustered by deal (a deal's four games are one cluster);
    `played`, `wall_s` and `cpu_s` are what this invocation did and how long it took, on `machine`."""
    ranks = clustered_mean([result.ranks for result in results], bounds=(1.0, 4.0))
    deltas = clustered_mean([result.score_deltas for result in results])
    all_ranks = np.array([result.ranks for result in results]).ravel()
    distribution = [float(np.mean(all_ranks == rank)) for rank in range(1, 5)]
    return MahjongEvalRow(
        timestamp=datetime.datetime.now().isoformat(timespec="seconds"),
        policy=config.policy or "", policy_size=policy.size, policy_step=policy.step,
        opponent=config.opponent, games=config.games, deals=config.deals, eval_seed=config.seed,
        policy_seed=policy.seed, policy_samples=policy.step * policy.global_batch, opponent_seed=None if opponent is None else opponent.seed,
        target=config.target, temperature=config.temperature,
        mean_rank=ranks.mean, mean_rank_ci95=_ci(ranks.ci95),
        mean_score_delta=deltas.mean, mean_score_delta_ci95=_ci(deltas.ci95),
        rank_distribution=distribution,
        games_per_s=played.games / wall_s if wall_s else 0.0,
        decisions_per_s=played.decisions / wall_s if wall_s else 0.0,
        engine_s=played.engine_s, network_s=played.network_s,
        threads=torch.get_num_threads(), torch_version=torch.__version__,
        mean_rank_ci95_half_width=ranks.half_width,
        within_deal_correlation=within_cluster_correlation([result.ranks for result in results]),
        eval_id=eval_id, policy_checkpoint=str(policy.checkpoint),
        opponent_size=None if opponent is None else opponent.size,
        opponent_step=None if opponent is None else opponent.step,
        deal_seeds=f"deal_seed({config.seed}, d) for d in 0..{config.deals - 1}",
        games_played=played.games, wall_s=wall_s, encode_s=played.encode_s,
        decisions=played.decisions, forward_calls=played.forward_calls, batch_games=config.batch_games,
        workers=config.workers, device=device_name, engine=engine_version(),
        deal_ranks=[list(result.ranks) for result in results],
        deal_score_deltas=[list(result.score_deltas) for result in results],
        cpu_s_per_wall_s=cpu_s / wall_s if wall_s else None,
        **identify(get_workload(WORKLOAD)).provenance(command, machine.at_end()).fields_of(MahjongEvalRow))


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the evaluation's workers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def run_mahjong_eval(config: MahjongEvalConfig, command: str,
                     on_deal: Callable[[DealResult], None] | None = None,
                     shares_file_with: tuple[str, ...] = ()) -> MahjongEvalRow:
    """Play the evaluation (or its unfinished rest), append its row to `config.out`, return it.

    `config.out` must be new or a file of evaluation rows (and of the `shares_file_with` kinds a
    caller writes beside them), checked before anything is read or played. `on_deal` is called
    after each deal is saved (tests stop an evaluation there)."""
    config.validate()
    check_rows_file(Path(config.out), f"--out {config.out}", kinds=(MahjongEvalRow.KIND, *shares_file_with))
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    policy = read_run_checkpoint(config.policy, WORKLOAD, "--policy", config.policy_step)
    opponent = None if config.opponent_is_builtin else read_run_checkpoint(config.opponent, WORKLOAD, "--opponent")
    target_family(config.target)  # an unknown or unusable target is refused before any file is touched
    out = Path(config.out)
    check_writable_directory(out.parent, f"--out {out}")
    progress = ProgressFile.open(config.progress_path, evaluation_settings(config, policy, opponent),
                                 out, config.deals, config.seed)

    todo = [deal for deal in range(config.deals) if deal not in progress.done]
    bar = tqdm(total=config.games, initial=ROTATIONS * (config.deals - len(todo)), unit="game",
               disable=not config.progress, smoothing=0.05)

    def deal_done(result: DealResult) -> None:
        progress.append(result)
        if on_deal is not None:
            on_deal(result)

    machine = Machine.at_start()
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    try:
        played = play_deals(config, policy, opponent, todo, deal_done, on_game=lambda: bar.update(1))
    finally:
        bar.close()
    wall_s, cpu_s = time.perf_counter() - started, _cpu_seconds() - cpu_started
    results = [progress.done[deal] for deal in range(config.deals)]
    row = summarize(config, command, progress.eval_id, played.device_name, policy, opponent, results,
                    played.times, wall_s, cpu_s, machine)
    append_row(out, row)
    progress.remove()
    return row
