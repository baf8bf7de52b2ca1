"""Commands that need no device start without the device stack: `--help` of every command imports
none of torch, torch_xla, jax, grpc, matplotlib or numpy, and `report`, `plot` and `data
verify/inspect` import no torch; `import trainspeed` imports nothing heavy and no module `trainspeed
--help` does not (each read from `python -X importtime` of a fresh process, as
benchmarks/startup.py reads it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from child_commands import REPO_ROOT

from benchmarks.startup import REPORT_INPUT, heavy_imports, imported_modules
from trainspeed.cli import main

pytestmark = pytest.mark.e2e

DEVICE_STACK = {"torch", "torch_xla", "jax", "grpc"}


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("arrays")
    np.savez(folder / "arrays.npz", x=np.zeros((64, 3), dtype=np.float32), y=np.arange(64, dtype=np.int64))
    # written in this process: the checks below start the commands whose imports are tested
    assert main(["data", "from-arrays", str(folder / "arrays.npz"), "--out", str(folder / "shards")]) == 0
    return folder / "shards"


@pytest.mark.parametrize("command", [[], ["bench"], ["train"], ["serve"], ["report"], ["plot"], ["study"],
                                     ["study", "batch-size"], ["data"], ["data", "mahjong-selfplay"],
                                     ["eval", "mahjong"]], ids=lambda command: " ".join(command) or "trainspeed")
def test_help_imports_nothing_heavy(command: list[str]) -> None:
    assert heavy_imports(["-m", "trainspeed", *command, "--help"], REPO_ROOT) == []


def test_import_trainspeed_imports_no_more_than_help() -> None:
    """The package's public names (`trainspeed.bench` ...) load their modules on first use only."""
    package = imported_modules(["-c", "import trainspeed; trainspeed.__all__"], REPO_ROOT)
    assert "trainspeed" in package and heavy_imports(["-c", "import trainspeed"], REPO_ROOT) == []
    assert package - imported_modules(["-m", "trainspeed", "--help"], REPO_ROOT) == set()


def test_report_and_plot_import_no_torch(tmp_path: Path) -> None:
    for argv in (["report", str(REPORT_INPUT), "--out", str(tmp_path / "page.html")],
                 ["plot", str(REPORT_INPUT), "--out", str(tmp_path / "figure")]):
        imported = heavy_imports(["-m", "trainspeed", *argv], REPO_ROOT)
        assert "matplotlib" in imported and not DEVICE_STACK & set(imported), (argv, imported)
    assert (tmp_path / "page.html").stat().st_size > 0 and (tmp_path / "figure.png").stat().st_size > 0


@pytest.mark.parametrize("verb", ["verify", "inspect"])
def test_data_verify_and_inspect_import_no_torch(verb: str, shards: Path) -> None:
    imported = heavy_imports(["-m", "trainspeed", "data", verb, str(shards)], REPO_ROOT)
    assert not DEVICE_STACK & set(imported), imported
