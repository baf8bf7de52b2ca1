"""`trainspeed eval mahjong` given impossible numbers or files it cannot read: one line
`trainspeed: error:`, exit code 2, no game played, and the files already there left as they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DEEP = "[" * 100_000 + "]" * 100_000
"""Nested past Python's recursion limit: its JSON reader raises RecursionError, not a decode error."""


def files(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize("argv, fragment", [
    (["--temperature", "nan"], "argument --temperature: 'nan' is not a finite number"),
    (["--temperature", "inf"], "argument --temperature: 'inf' is not a finite number"),
    (["--threads", "99999999999999999999"], f"argument --threads: '99999999999999999999' is more than {os.cpu_count()} threads, more than this machine's CPUs"),
    (["--threads", "100000"], f"argument --threads: '100000' is more than {os.cpu_count()} threads"),
    (["--seed", "-1"], "argument --seed: '-1' must be at least 0"),
    (["--workers", "100000"], f"argument --workers: '100000' is more than {os.cpu_count()} processes"),
])
def test_impossible_numbers_are_refused_before_any_game(cli_error, tiny_run, tmp_path, argv, fragment):
    out = tmp_path / "eval.jsonl"
    line = cli_error("eval", "mahjong", "--policy", str(tiny_run), "--games", "4", "--out", str(out),
                     "--no-progress", *argv)
    assert fragment in line, line
    assert files(tmp_path) == {}


@pytest.mark.parametrize("content, fragment", [
    (b"\x89PNG\r\n\x1a\n\xff binary", "not UTF-8 text (byte 0)"),
    (('{"kind": "mahjong-eval", "x": ' + DEEP + "}\n").encode(), "line 1: JSON nested too deeply to read"),
    (b'{"kind": "mahjong-eval"}\n"just a string"\n', "line 2 is not a JSON object"),
], ids=["binary", "deeply-nested", "not-an-object"])
def test_an_out_that_is_no_results_file_is_refused_and_kept(cli_error, tiny_run, tmp_path, content, fragment):
    out = tmp_path / "eval.jsonl"
    out.write_bytes(content)
    line = cli_error("eval", "mahjong", "--policy", str(tiny_run), "--games", "4", "--out", str(out),
                     "--no-progress", "--no-plot")
    assert f"--out {out}: " in line and fragment in line, line
    assert files(tmp_path) == {out: content}  # no row appended, no progress file begun


SETTINGS = '{"kind": "settings", "eval_id": "e1", "settings": {}}\n'


@pytest.mark.parametrize("content, fragment", [
    (b"\xff\xfe progress", "not UTF-8 text (byte 0)"),
    ((SETTINGS + '{"kind": "deal", "deal": ' + DEEP + "}\n").encode(), "line 2 is damaged"),
    ((SETTINGS + '{"kind": "deal", "deal": "first", "seed": 1}\n').encode(), "line 2 is not a finished deal"),
    (b'["settings"]\n', "is not a progress file of `trainspeed eval mahjong`"),
], ids=["binary", "deeply-nested", "wrong-types", "not-an-object"])
def test_a_damaged_progress_file_is_one_line_and_kept(cli_error, tiny_run, tmp_path, content, fragment):
    out = tmp_path / "eval.jsonl"
    progress = Path(f"{out}.progress")
    progress.write_bytes(content)
    line = cli_error("eval", "mahjong", "--policy", str(tiny_run), "--games", "4", "--out", str(out),
                     "--no-progress", "--no-plot")
    assert fragment in line, line
    assert files(tmp_path) == {progress: content}


@pytest.mark.parametrize("argv, fragment", [
    (["--threads", "1e20"], "argument --threads: '1e20' is not a whole number"),
    (["--threads", "100000000000000000000"], f"is more than {os.cpu_count()} threads"),
    (["--batch-size", "99999999999"], "argument --batch-size: '99999999999' is more than 1048576"),
])
def test_agreement_numbers_are_refused_where_they_are_parsed(cli_error, tiny_run, selfplay_data, tmp_path, argv, fragment):
    line = cli_error("eval", "mahjong-agreement", "--policy", str(tiny_run), "--data", str(selfplay_data),
                     "--out", str(tmp_path / "agreement.jsonl"), *argv)
    assert fragment in line, line
    assert files(tmp_path) == {}


@pytest.mark.parametrize("argv, fragment", [
    (["--seeds", "0"], "argument --seeds: '0' must be at least 1"),
    (["--temperature", "0"], "argument --temperature: '0' must be above 0"),
    (["--workers", "100000"], "processes, more than this machine's CPUs"),
])
def test_null_test_numbers_are_refused_where_they_are_parsed(cli_error, tiny_run, tmp_path, argv, fragment):
    line = cli_error("eval", "mahjong-null", "--policy", str(tiny_run), "--out", str(tmp_path / "null.jsonl"), *argv)
    assert fragment in line, line
    assert files(tmp_path) == {}


def test_the_help_says_95_percent_not_its_escaped_form(capsys):
    from trainspeed.cli import main

    for command in ("mahjong", "mahjong-null"):
        with pytest.raises(SystemExit):
            main(["eval", command, "--help"])
        text = capsys.readouterr().out
        assert "95% intervals" in text and "%%" not in text


def test_the_evaluated_runs_own_metrics_file_is_never_appended_to(cli_error, tiny_run, tmp_path):
    """`--out RUN/metrics.jsonl` once appended the evaluation's row to the run's metrics, after which
    `report RUN` refused the run: a file takes rows of its own kind only."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = files(run)
    metrics = run / "metrics.jsonl"
    line = cli_error("eval", "mahjong", "--policy", str(run), "--games", "4", "--out", str(metrics), "--no-progress")
    assert f"--out {metrics}: line 1 is a 'train' row, not a 'mahjong-eval' row" in line, line
    assert files(run) == before


@pytest.mark.parametrize("command, argv", [
    ("mahjong-agreement", ["--data", "DATA"]),
    ("mahjong-null", ["--seeds", "2", "--temperature", "1"]),
])
def test_agreement_and_null_test_append_only_to_files_of_their_own_rows(
        cli_error, tiny_run, selfplay_data, tmp_path, command, argv):
    bench_rows = tmp_path / "bench.jsonl"
    bench_rows.write_text('{"kind": "bench", "schema_version": 3}\n')
    argv = [str(selfplay_data) if arg == "DATA" else arg for arg in argv]
    line = cli_error("eval", command, "--policy", str(tiny_run), "--out", str(bench_rows), *argv)
    assert "line 1 is a 'bench' row" in line and "appends only to a file of its own rows" in line, line
    assert bench_rows.read_text() == '{"kind": "bench", "schema_version": 3}\n'
