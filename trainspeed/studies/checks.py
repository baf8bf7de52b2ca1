"""What a study checks before it writes anything: the size, targets and data its commands will
get, checked as those commands check them (so a bad one is one line, not a failed sub-command
after files were written). Kept apart from `common.py`, which the rows' modules read without torch."""

from __future__ import annotations

import os
from pathlib import Path

from trainspeed.errors import UsageError


def check_mahjong_settings(study: str, size: str, targets: tuple[str, ...] | list[str], *, served: bool = False) -> None:
    """The Mahjong size and the targets a study's commands get, checked as `trainspeed train`,
    `bench` and `serve` check them, so a bad one is one line before the study writes anything
    (`served`: every server serves the target, which must then be a local one)."""
    from trainspeed.targets import target_family
    from trainspeed.workloads import get_workload, resolve_size

    try:
        resolve_size(get_workload("mahjong"), size)
        for target in targets:
            if served and target.split(":", 1)[0] == "remote":
                raise UsageError(f"--target {target}: every server serves it, so it must be a local target "
                                 "(cpu, cuda, xla ...), not a remote one")
            target_family(target)
    except UsageError as error:
        raise UsageError(f"{study} study: {error}") from None


def data_ready(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a finished shard set (one a killed writer left unfinished does not:
    the study makes it again, and the writer completes it)."""
    from trainspeed.data.shards import load_index

    try:
        load_index(Path(folder))
    except UsageError:
        return False
    return True


def check_study_data(study: str, data: str, games: int, seed: int) -> None:
    """A Mahjong study's `--data`: a finished set of Mahjong shards, or a folder the study's
    `trainspeed data mahjong-selfplay` may make one in (new, empty, or its own unfinished set of the
    same settings), checked before the study writes anything: never a run directory or another
    writer's dataset."""
    from trainspeed.data.shards import load_index
    from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, check_out
    from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

    try:
        if data_ready(data):
            found = load_index(Path(data))["format"]
            if found != MAHJONG_SCHEMA.format_name:
                raise UsageError(f"--data {data} holds a {found!r} dataset, not Mahjong shards; give a folder "
                                 "of Mahjong shards or a new one for the study to make")
            return
        check_out(SelfPlayConfig(games=games, out=Path(data), seed=seed, progress=False), what="--data")
    except UsageError as error:
        raise UsageError(f"{study} study: {error}") from None



def selfplay_workers() -> str:
    """Processes the studies' `trainspeed data mahjong-selfplay` plays with: two, or one on a
    machine with one CPU (the command takes no more processes than the machine has)."""
    from trainspeed.flags import machine_cpus

    return str(min(2, machine_cpus()))
