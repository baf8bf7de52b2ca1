"""Self-play: deterministic per seed, resumable game by game, equal to re-encoding its mjai logs."""

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from child_commands import start_child, trainspeed_argv

from trainspeed.data.shards import open_shard, read_index
from trainspeed.errors import UsageError
from trainspeed.workloads.mahjong.data.mjai_import import import_mjai
from trainspeed.workloads.mahjong.data.selfplay import (
    SelfPlayConfig,
    game_seed,
    log_path,
    run_selfplay,
)
from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA

COLUMN_NAMES = ("features", "mask", "action", "game_id", "seat", "turn")


def _columns(folder) -> dict[str, np.ndarray]:
    shards = [open_shard(folder, info, MAHJONG_SCHEMA) for info in read_index(folder, MAHJONG_SCHEMA)["shards"]]
    return {name: np.concatenate([np.asarray(s[name]) for s in shards]) for name in COLUMN_NAMES}


def _checksums(folder) -> list[str]:
    return [shard["sha256"] for shard in read_index(folder, MAHJONG_SCHEMA)["shards"]]


def test_selfplay_writes_logs_shards_and_index(selfplay_run, selfplay_config):
    out, result = selfplay_run
    games = selfplay_config.games
    assert result.games == games and result.games_played == games
    assert result.shards == games // selfplay_config.games_per_shard
    assert all(log_path(out, g).exists() for g in range(games))
    assert result.samples == read_index(out, MAHJONG_SCHEMA)["samples"] > 100 * games


def test_samples_made_in_selfplay_equal_those_replayed_from_its_mjai_logs(selfplay_run, tmp_path):
    out, _ = selfplay_run
    imported = tmp_path / "imported"
    import_mjai([out / "mjai"], imported)
    played, replayed = _columns(out), _columns(imported)
    for name in COLUMN_NAMES:
        assert np.array_equal(played[name], replayed[name]), name


def test_rerun_after_interruption_plays_only_missing_games(selfplay_run, selfplay_config, tmp_path, start_jax):
    """Rerun where JAX has started (a caller's program may have): its worker is no fork of this process."""
    out, _ = selfplay_run
    folder = tmp_path / "resumed"
    shutil.copytree(out, folder)
    original = _checksums(out)
    # as if killed while playing the last chunk: its first game logged, its second not, no shard
    for suffix in (".bin", ".json"):
        (folder / f"shard-000001{suffix}").unlink()
    (folder / "index.json").unlink()
    log_path(folder, selfplay_config.games - 1).unlink()
    forks = start_jax()
    result = run_selfplay(dataclasses.replace(selfplay_config, out=folder, workers=1))
    assert (result.games_played, result.games_replayed) == (1, 1)
    assert _checksums(folder) == original
    assert forks() == []


def test_rerun_with_another_seed_is_refused(selfplay_run, selfplay_config, tmp_path):
    out, _ = selfplay_run
    folder = tmp_path / "other"
    shutil.copytree(out, folder)
    with pytest.raises(UsageError, match=r"made with other settings \(seed 7 -> 8\)"):
        run_selfplay(dataclasses.replace(selfplay_config, out=folder, seed=8))


def test_game_seeds_are_fixed_and_distinct():
    assert game_seed(7, 3) == game_seed(7, 3)
    seeds = {game_seed(seed, game) for seed in range(4) for game in range(1000)}
    assert len(seeds) == 4000


def test_bad_counts_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="--games"):
        run_selfplay(SelfPlayConfig(games=0, out=tmp_path, progress=False))
    with pytest.raises(UsageError, match="--workers"):
        run_selfplay(SelfPlayConfig(games=1, workers=0, out=tmp_path, progress=False))


def test_a_killed_run_leaves_no_partial_files_after_the_rerun(selfplay_run, selfplay_config, tmp_path):
    out, _ = selfplay_run
    folder = tmp_path / "killed"
    shutil.copytree(out, folder)
    (folder / ".shard-000001.bin.abc123.tmp").write_bytes(b"half a shard")
    (folder / "mjai" / ".game-00000003.jsonl.gz.def456.tmp").write_bytes(b"half a log")
    result = run_selfplay(dataclasses.replace(selfplay_config, out=folder, workers=1))
    assert (result.games_played, result.games_replayed) == (0, 0)
    assert not list(folder.rglob("*.tmp"))


@pytest.mark.e2e
def test_a_run_killed_midway_is_finished_by_a_rerun_as_if_never_killed(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    config = SelfPlayConfig(games=6, out=killed, seed=3, workers=1, games_per_shard=2, progress=False)
    script = ("import sys; from pathlib import Path; "
              "from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, run_selfplay; "
              "run_selfplay(SelfPlayConfig(games=6, out=Path(sys.argv[1]), seed=3, workers=1, games_per_shard=2, progress=False))")
    process = start_child([sys.executable, "-c", script, str(killed)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not (killed / "shard-000000.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / "index.json").exists(), "the run finished before it was killed"

    resumed = run_selfplay(config)
    assert resumed.games_played + resumed.games_replayed < 6  # the finished chunk was not redone
    reference = run_selfplay(dataclasses.replace(config, out=clean))
    assert _checksums(killed) == _checksums(clean) and resumed.samples == reference.samples


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has exited: it only waits for its new parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
def test_workers_die_with_a_selfplay_command_killed_outright(tmp_path, child_pids):
    command = trainspeed_argv("data", "mahjong-selfplay", "--games", "400", "--workers", "2",
                              "--games-per-shard", "1", "--out", str(tmp_path / "games"), "--no-progress")
    process = start_child(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        while len(workers) < 2 and process.poll() is None and time.monotonic() < deadline:
            workers = child_pids(process.pid)
            time.sleep(0.05)
        assert len(workers) >= 2, f"the pool never started: {process.poll()=}"
        while not list((tmp_path / "games" / "mjai").glob("game-*")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the workers are playing games, not waiting for their first task
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        gone_by = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not [pid for pid in workers if _alive(pid)], "workers outlived their killed parent"
    finally:
        process.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
