"""Self-play data: rule-based agents play games in parallel processes; logs and shards come out.

Work is cut into chunks of `games_per_shard` consecutive game ids; one chunk is one task and one
shard. Each game also leaves its own mjai log (`mjai/game-<id>.jsonl.gz`). A rerun skips chunks
whose shard is complete, and inside an unfinished chunk it re-encodes games that already have a log
from that log instead of playing them again (the two give equal samples), so only missing games
are played. Game `g` of seed `s` always uses the same wall and agents, whatever the worker count.

The folder is claimed first (`trainspeed.data.writer`): only a new or empty folder, or self-play's
own set of the same seed and shard size, is written into, and a rerun with more games extends it.
The set is marked finished once its index is written, so a kill -9 at any moment leaves a folder
that a rerun completes and that `verify` refuses until then.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from trainspeed.child_start import child_context, starting
from trainspeed.data.shards import INDEX_NAME, SHARD_PREFIX, ShardInfo
from trainspeed.data.writer import check_folder, claim_folder
from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular
from trainspeed.user_json import JSONRefused, loads
from trainspeed.parent_death import die_with_parent
from trainspeed.workloads.mahjong.agents import RuleBasedAgent
from trainspeed.workloads.mahjong.data.mjai_logs import read_games, write_log
from trainspeed.workloads.mahjong.data.shards import write_mahjong_index, write_mahjong_shard
from trainspeed.workloads.mahjong.encoding import EncodedSamples, encode_decisions
from trainspeed.workloads.mahjong.engine import play_game, replay_events

MANIFEST_NAME = "selfplay.json"
"""Where folders of earlier versions kept the settings (now in the folder's `writer.json`)."""
WRITER_NAME = "mahjong-selfplay"
LOG_FOLDER = "mjai"


@dataclass(frozen=True)
class SelfPlayConfig:
    games: int
    out: Path
    seed: int = 0
    workers: int = 1
    games_per_shard: int = 16
    progress: bool = True

    def manifest(self) -> dict:
        """What must match between a run and its resume."""
        return {"source": "selfplay", "agent": "rule-based x4", "seed": self.seed,
                "games_per_shard": self.games_per_shard}


@dataclass(frozen=True)
class SelfPlayResult:
    games: int
    samples: int
    shards: int
    games_played: int
    games_replayed: int
    seconds: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0


def game_seed(seed: int, game_id: int) -> int:
    """The engine seed of one game: a fixed mix of the run seed and the game id."""
    mixed = (seed * 0x9E3779B97F4A7C15 + game_id * 0xBF58476D1CE4E5B9) % 2**64
    return mixed >> 1


def log_path(out: Path, game_id: int) -> Path:
    return out / LOG_FOLDER / f"game-{game_id:08d}.jsonl.gz"


def shard_name(chunk: int) -> str:
    return f"{SHARD_PREFIX}{chunk:06d}"


def chunk_games(config: SelfPlayConfig, chunk: int) -> range:
    start = chunk * config.games_per_shard
    return range(start, min(start + config.games_per_shard, config.games))


@dataclass(frozen=True)
class ChunkResult:
    info: ShardInfo
    played: int
    replayed: int


def run_chunk(config: SelfPlayConfig, chunk: int) -> ChunkResult:
    """Play (or re-encode from its log) every game of one chunk and write the chunk's shard."""
    parts, played, replayed = [], 0, 0
    for game_id in chunk_games(config, chunk):
        path = log_path(config.out, game_id)
        if path.exists():
            (events,) = read_games(path)
            decisions = list(replay_events(events))
            replayed += 1
        else:
            record = play_game([RuleBasedAgent() for _ in range(4)], seed=game_seed(config.seed, game_id))
            write_log(path, record.mjai_log)
            decisions = record.decisions
            played += 1
        parts.append(encode_decisions(decisions, game_id))
    info = write_mahjong_shard(config.out, shard_name(chunk), EncodedSamples.concatenate(parts))
    return ChunkResult(info, played, replayed)


def legacy_settings(folder: Path) -> dict | None:
    """The settings of a self-play folder made before folders recorded their writer (its
    `selfplay.json`), or None when it has none."""
    path = folder / MANIFEST_NAME
    if not path.is_file() or not (folder / INDEX_NAME).is_file():
        return None
    try:
        found = loads(read_regular(path, str(path), 1 << 16))
    except (UsageError, UnicodeDecodeError, JSONRefused):
        return None
    return found if isinstance(found, dict) and found.get("source") == "selfplay" else None


def check_out(config: SelfPlayConfig, what: str = "--out") -> None:
    """UsageError, reading only, when `config.out` is not a folder self-play may write into: new,
    empty, or its own set of the same seed and shard size (`trainspeed.data.writer.check_folder`).
    Call it before work that ends in making self-play data there (a study checks its --data, and
    names it `what`)."""
    check_folder(config.out, WRITER_NAME, config.manifest(), what=what, legacy=legacy_settings)


def _remove_stale_temporaries(out: Path) -> None:
    """Half-written files of a run killed outright (atomic writes clean up on exceptions, not on
    SIGKILL); they are never read, but no partial shard should stay behind."""
    for stale in [*out.glob(f".{SHARD_PREFIX}*.tmp"), *(out / LOG_FOLDER).glob(".game-*.tmp")]:
        stale.unlink(missing_ok=True)


def _is_complete(config: SelfPlayConfig, chunk: int) -> bool:
    sidecar = config.out / f"{shard_name(chunk)}.json"
    if not sidecar.exists():
        return False
    games = chunk_games(config, chunk)
    info = loads(read_regular(sidecar, str(sidecar), 1 << 20))  # read as whole by `_refuse_fewer_games` first
    return info["games"] == len(games) and info["last_game_id"] == games[-1]


def _refuse_fewer_games(config: SelfPlayConfig) -> None:
    """A rerun extends a set, never shrinks it: a shard holding a game at or past `--games` (an
    earlier run made more) would be overwritten by one with fewer games."""
    for sidecar in sorted(config.out.glob(f"{SHARD_PREFIX}*.json")):
        try:
            last = loads(read_regular(sidecar, str(sidecar), 1 << 20).decode("utf-8"))["last_game_id"]
        except (UsageError, UnicodeDecodeError, JSONRefused, KeyError, TypeError):
            raise UsageError(f"{sidecar}: not a shard record of self-play; the folder is damaged (choose a new "
                             "--out)") from None
        if isinstance(last, int) and last >= config.games:
            raise UsageError(f"--games {config.games}: {config.out} already holds games up to id {last}; use "
                             f"--games {last + 1} or more to extend it (a set is never shrunk)")


def run_selfplay(config: SelfPlayConfig) -> SelfPlayResult:
    if config.games < 1:
        raise UsageError(f"--games {config.games}: must be at least 1")
    if config.workers < 1:
        raise UsageError(f"--workers {config.workers}: must be at least 1")
    if check_folder(config.out, WRITER_NAME, config.manifest(), legacy=legacy_settings) is not None:
        _refuse_fewer_games(config)
    claim = claim_folder(config.out, WRITER_NAME, config.manifest(), legacy=legacy_settings, extends=True)
    _remove_stale_temporaries(config.out)
    chunks = -(-config.games // config.games_per_shard)
    todo = [c for c in range(chunks) if not _is_complete(config, c)]
    started = time.perf_counter()
    played = replayed = 0
    bar = tqdm(total=config.games, initial=config.games - sum(len(chunk_games(config, c)) for c in todo),
               unit="game", disable=not config.progress)
    # forked where that is safe (no JAX started in this process), else from a fork server
    context = child_context(preload=(__name__,))
    # the workers die with this process, so a kill -9 of the command leaves none playing on
    with ProcessPoolExecutor(max_workers=config.workers, mp_context=context,
                             initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        with starting(context):  # the pool starts its workers as the first tasks arrive
            futures = {pool.submit(run_chunk, config, chunk): chunk for chunk in todo}
        for future in as_completed(futures):
            result = future.result()
            played, replayed = played + result.played, replayed + result.replayed
            bar.update(result.info.stats["games"])
    bar.close()
    index = write_mahjong_index(config.out, extra={"source": config.manifest()})
    claim.finish()
    return SelfPlayResult(games=index["games"], samples=index["samples"], shards=len(index["shards"]),
                          games_played=played, games_replayed=replayed,
                          seconds=time.perf_counter() - started)
