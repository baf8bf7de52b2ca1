"""Bad flags and bad files given to bench (and any command's parser): one line `trainspeed: error:`,
exit code 2, before any work, and the results file already there is left as it was."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from trainspeed.cli import main

QUICK_BENCH = ["bench", "--size", "tiny", "--targets", "cpu:eager:fp32", "--batch-sizes", "8", "--windows", "1",
               "--min-window-s", "0.01", "--warmup-steps", "1", "--peak-tflops", "1", "--no-progress", "--no-plot"]


@pytest.fixture(scope="module")
def earlier_results(tmp_path_factory) -> Path:
    """A results file with a real row in it, as an earlier bench left it."""
    path = tmp_path_factory.mktemp("earlier") / "results.jsonl"
    assert main([*QUICK_BENCH, "--out", str(path)]) == 0
    return path


@pytest.fixture
def results(earlier_results, tmp_path) -> Path:
    path = tmp_path / "results.jsonl"
    shutil.copy(earlier_results, path)
    return path


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--peak-tflops", "nan"], "argument --peak-tflops: 'nan' is not a finite number"),
        (["--peak-tflops", "inf"], "argument --peak-tflops: 'inf' is not a finite number"),
        (["--peak-tflops", "-3"], "argument --peak-tflops: '-3' must be above 0"),
        (["--min-window-s", "nan"], "argument --min-window-s: 'nan' is not a finite number"),
        (["--min-window-s", "1e999"], "argument --min-window-s: '1e999' is not a finite number"),
        (["--min-window-s", "-0.5"], "argument --min-window-s: '-0.5' must be above 0"),
        (["--min-window-s", "1e9"], "argument --min-window-s: '1e9' is more than 3600 s"),
        (["--batch-sizes", "2^1..2^100000"], "batch size 2^100000 is over the limit of 2^40"),
        (["--batch-sizes", "2^99"], "batch size 2^99 is over the limit of 2^40"),
        (["--batch-sizes", "99999999999999999999999"], "batch size 99999999999999999999999 is over the limit"),
        (["--batch-sizes", "8," + "9" * 5000], "is over the limit of 2^40"),
        (["--batch-sizes", "2^" + "9" * 5000], "is over the limit of 2^40"),
        (["--batch-sizes", "-99999999999999999999999"], "must be a positive integer"),
        (["--batch-sizes", "2^41"], "a TiB, more than any device holds"),
        (["--threads", "99999999999999999999"], f"argument --threads: '99999999999999999999' is more than {os.cpu_count()} threads, more than this machine's CPUs"),
        (["--threads", "0"], "argument --threads: '0' must be at least 1"),
        (["--windows", "many"], "argument --windows: 'many' is not a whole number"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--batch-sizes", "2^10..2^6"], "--batch-sizes '2^10..2^6': give batch sizes from 1 to 2^40 (64 or 2^6) "
         "separated by commas, e.g. 64,256,1024, or a range of powers of two such as 2^6..2^14; the range must go up"),
        (["--targets", ","], "--targets ',': give targets (device:mode:precision) separated by commas, "
         "e.g. cpu:eager:fp32,xla:lazy:fp32"),
        (["--windows", "0"], "--windows must be >= 1 and --warmup-steps >= 0"),
        (["--max-steps-per-window", "0"], "--max-steps-per-window must be >= 1, got 0"),
    ],
)
def test_impossible_bench_flags_are_one_line_before_any_work(cli_error, results, argv, fragment):
    before = results.read_bytes()
    line = cli_error(*QUICK_BENCH, "--out", str(results), *argv)
    assert fragment in line, line
    assert results.read_bytes() == before
    assert not results.with_suffix(".csv").exists()  # nothing was measured, so nothing was exported


def test_a_bench_out_that_never_ends_is_not_read(cli_error):
    line = cli_error(*QUICK_BENCH, "--out", "/dev/zero")
    assert "--out /dev/zero: is a character device, not a regular file" in line, line


def test_the_largest_batch_size_is_accepted_and_the_next_is_not(cli_error, tmp_results):
    from trainspeed.bench.config import BATCH_SIZE_LIST, MAX_BATCH_SIZE

    assert BATCH_SIZE_LIST("2^40") == (MAX_BATCH_SIZE,) == BATCH_SIZE_LIST(str(MAX_BATCH_SIZE))
    assert BATCH_SIZE_LIST("2^38..2^40") == (2**38, 2**39, 2**40)
    line = cli_error(*QUICK_BENCH, "--batch-sizes", str(MAX_BATCH_SIZE + 1), "--out", str(tmp_results))
    assert "over the limit of 2^40" in line


def binary_file(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe not a results file")


def deeply_nested_line(path: Path) -> None:
    path.write_text('{"run_id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")


def a_folder(path: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("a file the user keeps here")


def a_list_per_line(path: Path) -> None:
    path.write_text("[1, 2, 3]\n")


@pytest.mark.parametrize(
    "make_out, fragment",
    [
        (binary_file, "not UTF-8 text (byte 0)"),
        (deeply_nested_line, "line 1: JSON nested too deeply to read"),
        (a_folder, "is a folder; give a file"),
        (a_list_per_line, "line 1 is not a JSON object"),
    ],
    ids=["binary", "deeply-nested", "folder", "not-an-object"],
)
def test_a_bench_out_that_is_no_results_file_is_refused_and_kept(cli_error, tmp_path, make_out, fragment):
    out = tmp_path / "results.jsonl"
    make_out(out)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    line = cli_error(*QUICK_BENCH, "--out", str(out))
    assert f"--out {out}: " in line and fragment in line, line
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["plot"], "the following arguments are required: results"),
        (["data", "mahjong-selfplay", "--games", "two", "--out", "o"], "argument --games: 'two' is not a whole number"),
        (["data", "mahjong-selfplay", "--games", "4", "--games-per-shard", "0", "--out", "o"],
         "argument --games-per-shard: '0' must be at least 1"),
        (["data", "mahjong-selfplay", "--games", "4", "--workers", "-2", "--out", "o"],
         "argument --workers: '-2' must be at least 1"),
        (["data", "from-mjai", "log.jsonl", "--games-per-shard", "0", "--out", "o"],
         "argument --games-per-shard: '0' must be at least 1"),
        (["data", "images", "src", "--out", "d.zip", "--resolution", "big"],
         "argument --resolution: 'big' is not a whole number"),
        (["train", "--steps", "lots"], "argument --steps: 'lots' is not a whole number"),
        (["nosuch"], "argument COMMAND: invalid choice: 'nosuch'"),
    ],
)
def test_a_parser_error_of_any_command_is_one_line(cli_error, tmp_path, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    line = cli_error(*argv)
    assert fragment in line and "--help" in line, line
    assert list(tmp_path.iterdir()) == []


def test_bench_appends_only_to_a_file_of_bench_rows(cli_error, tmp_path):
    """A run's metrics.jsonl (or an evaluation's results) is no place for bench rows."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"kind": "train", "schema_version": 1, "step": 2}\n')
    line = cli_error(*QUICK_BENCH, "--out", str(metrics))
    assert f"--out {metrics}: line 1 is a 'train' row, not a 'bench' row" in line, line
    assert metrics.read_text() == '{"kind": "train", "schema_version": 1, "step": 2}\n'


@pytest.mark.parametrize(
    "argv, flag, text",
    [
        (["bench"], "--batch-sizes", "lots"),
        (["bench"], "--feed", "host,host"),
        (["bench"], "--noise-scale", "maybe"),
        (["study", "scaling", "--out", "o"], "--ranks", "0,2"),
        (["study", "batch-size", "--out", "o"], "--lr-factors", "1,nan"),
        (["study", "batch-size", "--out", "o"], "--seeds", "-1"),
        (["study", "time-to-target", "--out", "o"], "--global-batches", "64,x"),
        (["study", "remote", "--out", "o"], "--links", ","),
        (["study", "throughput", "--out", "o"], "--targets", ""),
        (["plan", "rows.jsonl"], "--devices", "1,0"),
        (["plan", "rows.jsonl"], "--global-batches", "99999999999"),
        (["plan", "rows.jsonl"], "--check", ","),
        (["plan", "rows.jsonl"], "--targets", " , "),
    ],
)
def test_every_list_flag_says_what_is_wrong_in_one_shape(cli_error, tmp_path, monkeypatch, argv, flag, text):
    """Every comma-separated flag is read by one type: the flag, the text, the list it takes and an example."""
    monkeypatch.chdir(tmp_path)
    line = cli_error(*argv, flag, text)
    assert line.startswith(f"trainspeed: error: {flag} {text!r}: give ") and " separated by commas, e.g. " in line, line
    assert list(tmp_path.iterdir()) == []
