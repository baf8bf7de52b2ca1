"""The generic data tests' shard set (`point_shards.py`), written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from point_shards import write_points


@pytest.fixture(scope="session")
def point_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_points(tmp_path_factory.mktemp("points"))
