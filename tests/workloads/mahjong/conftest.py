"""A small self-play shard folder shared by the Mahjong data tests (made once per session)."""

from pathlib import Path

import pytest

from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, SelfPlayResult, run_selfplay


@pytest.fixture(scope="session")
def selfplay_config(tmp_path_factory) -> SelfPlayConfig:
    return SelfPlayConfig(games=4, out=tmp_path_factory.mktemp("selfplay"), seed=7, workers=2,
                          games_per_shard=2, progress=False)


@pytest.fixture(scope="session")
def selfplay_run(selfplay_config) -> tuple[Path, SelfPlayResult]:
    return selfplay_config.out, run_selfplay(selfplay_config)


@pytest.fixture(scope="session")
def mahjong_shards(selfplay_run) -> Path:
    return selfplay_run[0]
