"""The processes of a multi-rank run import nothing from the folder the command runs in: a results
or data folder received from someone may hold a `torch.py`, which every rank would otherwise run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import untrusted_modules_imported
from train_runs import TINY_RUN

from trainspeed.cli import main

pytestmark = pytest.mark.e2e


def test_the_agent_and_ranks_of_a_two_rank_run_import_nothing_from_the_working_folder(
        untrusted_folder: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture, start_jax) -> None:
    """The command in this process, run from the folder (its agent and ranks are its children,
    started there): what is tested is what they import. JAX runs in this process (a caller's program
    may have started it): the agent is started with no fork of it."""
    forks = start_jax()
    monkeypatch.chdir(untrusted_folder)
    code = main(["train", *TINY_RUN, "--synthetic-data", "--nproc", "2", "--batch-size-per-device", "8", "--steps", "2",
                 "--out", "run"])
    printed = capfd.readouterr()
    assert untrusted_modules_imported(untrusted_folder) == []
    assert forks() == []
    assert code == 0, printed.out[-3000:] + printed.err[-3000:]
    # the ranks still run in the working folder: a relative --out means what the user meant
    summary = json.loads((untrusted_folder / "run" / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["last_step"] == 2
