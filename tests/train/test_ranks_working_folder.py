"""The processes of a multi-rank run import nothing from the folder the command runs in: a results
or data folder received from someone may hold a `torch.py`, which every rank would otherwise run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import run_child, untrusted_modules_imported
from train_runs import train_command, train_env

pytestmark = pytest.mark.e2e


def test_the_agent_and_ranks_of_a_two_rank_run_import_nothing_from_the_working_folder(untrusted_folder: Path) -> None:
    result = run_child(train_command("--synthetic-data", "--nproc", "2", "--batch-size-per-device", "8", "--steps", "2",
                                     "--out", "run"), env=train_env(), cwd=untrusted_folder, timeout=180)
    assert untrusted_modules_imported(untrusted_folder) == []
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # the ranks still run in the working folder: a relative --out means what the user meant
    summary = json.loads((untrusted_folder / "run" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["last_step"] == 2
