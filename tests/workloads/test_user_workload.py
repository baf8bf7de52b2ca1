"""A user's own workload, from a model this project did not write, runs through the bench CLI."""

import json
import sys
from pathlib import Path

import pytest

from trainspeed.cli import main
from trainspeed.workloads import get_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_resnet18_from_torchvision_benches_through_the_cli(examples_on_path, tmp_results, capsys):
    pytest.importorskip("torchvision")
    code = main([
        "bench", "--workload", "resnet18_workload:ResNet18Workload", "--size", "32px",
        "--targets", "cpu:eager:fp32", "--batch-sizes", "2,4", "--windows", "2", "--warmup-steps", "1",
        "--min-window-s", "0.01", "--out", str(tmp_results), "--no-progress", "--no-plot",
    ])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in tmp_results.read_text().splitlines()]
    assert [(r["workload"], r["batch_size"], r["status"]) for r in rows] == [("resnet18", 2, "ok"), ("resnet18", 4, "ok")]
    assert rows[0]["flops_per_sample"] > 1e8  # ResNet-18 at 32 px: ~0.56 GFLOP forward, x3 for training


def test_a_factory_that_is_not_a_workload_is_refused(monkeypatch):
    from trainspeed.errors import UsageError

    monkeypatch.setitem(sys.modules, "not_a_workload", type(sys)("not_a_workload"))
    sys.modules["not_a_workload"].factory = lambda: object()
    with pytest.raises(UsageError, match="lacks name, sizes, build"):
        get_workload("not_a_workload:factory")


COMMANDS = {
    "bench": ["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "4", "--no-progress", "--no-plot"],
    "train": ["train", "--synthetic-data", "--steps", "1", "--no-progress"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("factory", "says"), [
    ("toy_workload:raising_factory", "the factory raised RuntimeError: cannot find the weights of my model"),
    ("toy_workload:none_factory", "the factory returned a NoneType, which lacks name, sizes"),
    ("toy_workload:misnamed_sizes", "its sizes are 'narrow', not a non-empty tuple of names"),
    ("toy_workload:not_a_factory", "'not_a_factory' is a int, not a factory to call"),
    ("toy_workload:nosuch", "module 'toy_workload' has no 'nosuch'"),
    ("no_such_module_anywhere:factory", "cannot import 'no_such_module_anywhere' (ModuleNotFoundError"),
    (":factory", "write it as package.module:factory"),
])
def test_a_factory_that_fails_or_returns_no_workload_is_one_line_naming_it(
        command, factory, says, tmp_path, capsys):
    out = tmp_path / ("rows.jsonl" if command == "bench" else "run")
    assert main([*COMMANDS[command], "--workload", factory, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"trainspeed: error: --workload {factory}: ") and says in line
    assert not out.exists()
