"""The commands a study runs (`trainspeed.studies.common.run_trainspeed`, which `study` and
`plan --check` run every child command with) import nothing from the folder the study runs in."""

from __future__ import annotations

from pathlib import Path

import child_commands
import pytest
from child_commands import untrusted_modules_imported

from trainspeed.studies.common import run_trainspeed

pytestmark = pytest.mark.e2e


def test_a_study_s_commands_import_nothing_from_the_working_folder(untrusted_folder: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    child_commands.check_marked()  # the child starts through the studies' runner, not the tests' one
    monkeypatch.chdir(untrusted_folder)  # a study runs its commands in its own working folder
    result = run_trainspeed("info")  # imports torch, numpy and psutil
    assert untrusted_modules_imported(untrusted_folder) == []
    assert "cpu:eager:fp32" in result.stdout
