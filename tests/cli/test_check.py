"""`trainspeed check`: the port check as a user runs it. A workload whose step calls torch.bincount
(the tests' toy, tests/toy_workload.py) is reported with the line, written to --out, and fails
under --strict; a target that is not XLA, a bad flag or an --out that exists is one error line and
exit code 2 before anything is built; `check --help` imports nothing heavy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import REPO_ROOT, TESTS, run_trainspeed

from benchmarks.startup import heavy_imports

FALLBACK_WORKLOAD = "toy_workload:class_weighted"


@pytest.mark.e2e
def test_check_names_the_fallback_and_its_line_writes_the_result_and_fails_under_strict(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    result = run_trainspeed("check", "--workload", FALLBACK_WORKLOAD, "--target", "xla:lazy:fp32", "--batch-size", "8",
                            "--warmup-steps", "2", "--steps", "2", "--out", str(out), "--strict", path=(TESTS,))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "  aten::bincount: 1" in lines
    assert any(line.startswith("    called from ") and "toy_workload.py:" in line
               and line.endswith('counts = torch.bincount(batch["y"], minlength=self.classes)') for line in lines), lines
    assert "compiles in the measured steps: 0" in lines
    assert lines[-2].startswith("verdict: not ported: 1 op falls back to the host (aten::bincount)")
    record = json.loads(out.read_text())
    assert record["kind"] == "xla-port-check" and record["ported"] is False and record["steps"] == 2
    assert [op["op"] for op in record["fallback_ops"]] == ["aten::bincount"]


@pytest.mark.parametrize("argv, fragment", [
    (["--target", "cpu:eager:fp32"], "check: --target cpu:eager:fp32 is not an XLA target; the port check runs on "
                                     "xla:* targets (steps counted on the device) and jax:* targets"),
    (["--target", "remote:localhost:50051/xla:lazy:fp32"], "is not an XLA target"),
    (["--steps", "0"], "argument --steps: '0' must be at least 1"),
    (["--batch-size", "-2"], "argument --batch-size: '-2' must be at least 1"),
    (["--workload", "no_such_module:factory"], "--workload no_such_module:factory: cannot import 'no_such_module'"),
    (["--size", "enormous"], "enormous"),
])
def test_bad_input_is_one_line_before_anything_runs(cli_error, argv: list[str], fragment: str) -> None:
    assert fragment in cli_error("check", "--workload", "mahjong", *argv)


def test_an_existing_out_file_is_left_alone(cli_error, tmp_path: Path) -> None:
    out = tmp_path / "earlier.json"
    out.write_text("{}\n")
    assert "already exists; give a new path" in cli_error("check", "--out", str(out))
    assert out.read_text() == "{}\n"


@pytest.mark.e2e
def test_check_help_imports_nothing_heavy() -> None:
    assert heavy_imports(["-m", "trainspeed", "check", "--help"], REPO_ROOT) == []


def test_a_result_file_made_while_the_check_ran_is_left_alone(tmp_path: Path) -> None:
    """`check --out` found the path free before running; a file made there since (the user's, or
    a second check's) is refused in one line when the result is written, and stays as it was."""
    from trainspeed.atomic import FileAppeared
    from trainspeed.bench.port_check import write_check
    from trainspeed.bench.port_check_rows import PortCheck

    out = tmp_path / "check.json"
    out.write_text("another check's result\n")
    check = PortCheck(timestamp="2026-01-01T00:00:00+00:00", workload="mahjong", size="tiny", target="xla:lazy:fp32",
                      device_name="XLA CPU", batch_size=8, warmup_steps=2, steps=2, fallback_ops=[],
                      compiles_in_steps=0, device_to_host_per_step=0.0, final_loss=2.3, verdict="ported", ported=True)
    with pytest.raises(FileAppeared, match=f"--out {out}: a file appeared there while this command ran"):
        write_check(out, check)
    assert out.read_text() == "another check's result\n" and [path.name for path in tmp_path.iterdir()] == ["check.json"]
