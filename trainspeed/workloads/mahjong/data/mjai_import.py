"""Encode existing mjai logs (other engines, human games) into a shard folder.

All or nothing: shards are written into a staging folder inside `out` and moved into place with the
index only when every log encoded, so a bad log leaves no shard behind. The folder is claimed first
(`trainspeed.data.writer`): a new or empty one, or one a killed import of the same logs left, which
the rerun writes again; the set is marked finished after its index. Game ids are given in input
order (files sorted within a folder argument); `games.json` maps each id back to its file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from trainspeed.atomic import atomic_write_text
from trainspeed.data.shards import SHARD_PREFIX
from trainspeed.data.writer import claim_folder, clear_own_files
from trainspeed.errors import UsageError
from trainspeed.user_files import regular_file_problem
from trainspeed.workloads.mahjong.data.mjai_logs import LoggedEvent, read_games
from trainspeed.workloads.mahjong.data.shards import write_mahjong_index, write_mahjong_shard
from trainspeed.workloads.mahjong.encoding import EncodedSamples, IllegalAction, encode_decisions
from trainspeed.workloads.mahjong.engine import IllegalLogEvent, replay_events

WRITER_NAME = "from-mjai"
LOG_SUFFIXES = (".json", ".jsonl", ".mjson", ".log", ".gz")
GAMES_NAME = "games.json"


@dataclass(frozen=True)
class ImportResult:
    files: int
    games: int
    samples: int
    shards: int


def expand_inputs(inputs: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given; folders contribute their log files, sorted. Missing paths are an error."""
    files: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES))
            if not found:
                raise UsageError(f"{path}: folder holds no mjai logs (*{', *'.join(LOG_SUFFIXES)})")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            raise UsageError(f"{path}: {regular_file_problem(path)}; give mjai log files or folders of them")
        else:
            raise UsageError(f"{path}: no such file or folder")
    if not files:
        raise UsageError("no mjai logs given")
    return files


def encode_game(path: Path, events: list[LoggedEvent], game_id: int) -> EncodedSamples:
    """One logged game's samples; errors become UsageError naming file and line."""
    try:
        return encode_decisions(list(replay_events(events)), game_id)
    except IllegalLogEvent as error:
        raise UsageError(f"{path}: {error}") from None
    except IllegalAction as error:
        raise UsageError(f"{path}: {error}") from None


def _games(files: list[Path]) -> Iterator[tuple[Path, int, list[LoggedEvent]]]:
    for path in files:
        for number, events in enumerate(read_games(path)):
            yield path, number, events


def import_mjai(inputs: Iterable[str | os.PathLike], out: str | os.PathLike,
                games_per_shard: int = 16) -> ImportResult:
    files = expand_inputs(inputs)
    out = Path(out)
    settings = {"logs": [str(path.resolve()) for path in files], "games_per_shard": games_per_shard}
    claim = claim_folder(out, WRITER_NAME, settings)
    clear_own_files(claim)  # what a killed import of these logs left: it starts over
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=out))
    try:
        sources, pending, shards = [], [], 0
        for game_id, (path, number, events) in enumerate(_games(files)):
            pending.append(encode_game(path, events, game_id))
            sources.append({"game_id": game_id, "file": str(path), "game_in_file": number})
            if len(pending) == games_per_shard:
                write_mahjong_shard(staging, f"{SHARD_PREFIX}{shards:06d}", EncodedSamples.concatenate(pending))
                pending, shards = [], shards + 1
        if pending:
            write_mahjong_shard(staging, f"{SHARD_PREFIX}{shards:06d}", EncodedSamples.concatenate(pending))
            shards += 1
        for produced in staging.iterdir():
            os.replace(produced, out / produced.name)
        atomic_write_text(out / GAMES_NAME, json.dumps(sources, indent=0))
        index = write_mahjong_index(out, extra={"source": {"source": "mjai", "files": len(files)}})
        claim.finish()
    except BaseException:
        claim.abandon()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ImportResult(files=len(files), games=index["games"], samples=index["samples"], shards=shards)
