"""One size rule for every command: `--size` is checked by one function, the same line for bench
and train, and without `--size` every command uses the workload's own default size."""

from __future__ import annotations

import json

import pytest
from child_commands import run_trainspeed

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.workloads import get_workload, resolve_size

BENCH = ["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "4", "--windows", "1", "--warmup-steps", "0",
         "--min-window-s", "0.01", "--no-progress", "--no-plot", "--peak-tflops", "1"]


def _error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


@pytest.mark.parametrize(("workload", "sizes"), [
    ("mahjong", "tiny, small, base, base-fast, large"),
    ("toy_workload:own_sizes", "narrow, wide"),
])
def test_bench_and_train_refuse_an_unknown_size_with_the_same_line_listing_the_sizes(
        workload, sizes, tmp_path, capsys):
    results, run = tmp_path / "rows.jsonl", tmp_path / "run"
    assert main([*BENCH, "--workload", workload, "--size", "nosuch", "--out", str(results)]) == 2
    bench_line = _error_line(capsys)
    assert main(["train", "--workload", workload, "--size", "nosuch", "--synthetic-data", "--steps", "1",
                 "--out", str(run), "--no-progress"]) == 2
    train_line = _error_line(capsys)
    assert bench_line == train_line
    assert bench_line.startswith("trainspeed: error: --size 'nosuch' is not a size of workload ")
    assert f"choose one of {sizes}" in bench_line
    assert not results.exists() and not run.exists()


def test_a_user_workload_without_a_default_size_is_benched_at_its_first(tmp_path, capsys):
    for factory, expected in (("own_sizes", "narrow"), ("wide_by_default", "wide")):
        results = tmp_path / f"{factory}.jsonl"
        assert main([*BENCH, "--workload", f"toy_workload:{factory}", "--out", str(results)]) == 0, capsys.readouterr().err
        (row,) = [json.loads(line) for line in results.read_text().splitlines()]
        assert (row["size"], row["status"]) == (expected, "ok")


@pytest.mark.e2e
def test_bench_and_train_default_to_the_same_size_of_a_built_in(tmp_path, capsys):
    results = tmp_path / "rows.jsonl"
    assert main([*BENCH, "--workload", "mahjong", "--out", str(results)]) == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    run = tmp_path / "run"
    result = run_trainspeed("train", "--workload", "mahjong", "--synthetic-data", "--steps", "1",
                            "--batch-size-per-device", "4", "--threads", "1", "--no-progress", "--out", str(run))
    assert result.returncode == 0, result.stderr
    assert row["size"] == json.loads((run / "train_config.json").read_text())["size"] == "tiny"
    assert json.loads((run / "summary.json").read_text())["size"] == "tiny"


def test_switches_after_a_size_follow_the_same_rule_everywhere():
    mahjong = get_workload("mahjong")
    assert resolve_size(mahjong, "tiny+pad-matmuls+bf16-stream") == "tiny+pad-matmuls+bf16-stream"
    assert resolve_size(mahjong, "base-fast") == "base-fast"
    with pytest.raises(UsageError, match=r"--size 'tiny\+nosuch' .* optionally followed by \+switches from bf16-stream"):
        resolve_size(mahjong, "tiny+nosuch")
    with pytest.raises(UsageError, match=r"--size 'nosuch\+pad-matmuls'"):
        resolve_size(mahjong, "nosuch+pad-matmuls")
    stylegan3 = get_workload("stylegan3")
    assert resolve_size(stylegan3, None) == "tiny-t" and resolve_size(stylegan3, "t256+channels-last") == "t256+channels-last"
