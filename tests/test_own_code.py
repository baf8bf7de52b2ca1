"""Where trainspeed's own code lies: what a child command puts on its path, and which frame of a
stack is the workload's."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import pytest
import torch

import trainspeed
from trainspeed.own_code import IMPORT_ROOT, PACKAGE_DIR, machinery


def _stack(*frames: tuple[str, int, str]) -> traceback.StackSummary:
    return traceback.StackSummary.from_list([traceback.FrameSummary(path, line, name, line="x = f(y)")
                                             for path, line, name in frames])


def test_the_package_folder_is_the_one_the_package_was_imported_from() -> None:
    assert PACKAGE_DIR == os.path.dirname(os.path.abspath(trainspeed.__file__))
    assert (IMPORT_ROOT / "trainspeed" / "own_code.py").is_file()


def test_the_workload_line_passes_over_machinery_and_keeps_built_in_workloads(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the checkout's files are then named whole
    torch_file = os.path.join(os.path.dirname(torch.__file__), "nn", "modules", "module.py")
    trainer = os.path.join(PACKAGE_DIR, "bench", "timing.py")
    model = os.path.join(PACKAGE_DIR, "workloads", "mahjong", "model.py")
    stack = _stack((trainer, 10, "run_step"), (model, 42, "forward"), (torch_file, 7, "_call_impl"),
                   ("<string>", 1, "<module>"))
    assert machinery(torch).workload_line(stack) == f"{model}:42 in forward: x = f(y)"


def test_a_workload_under_the_working_folder_is_named_relative_to_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = str(tmp_path / "my_model.py")
    assert machinery(torch).workload_line(_stack((mine, 3, "step"))) == "my_model.py:3 in step: x = f(y)"


def test_a_stack_of_machinery_alone_has_no_workload_line() -> None:
    assert machinery(torch).workload_line(_stack((os.path.join(PACKAGE_DIR, "cli", "bench.py"), 1, "main"))) is None
