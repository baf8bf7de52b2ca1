"""`trainspeed report` as a user runs it: a page, or one error line and exit code 2."""

import json

from tests.report.report_rows import bench_rows, eval_row, write_jsonl
from trainspeed.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainspeed: error: "), err
    return lines[0][len("trainspeed: error: "):]


def test_report_writes_one_page(capsys, tmp_path):
    rows = write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])
    out = tmp_path / "site" / "report.html"
    code, stdout, err = run_cli(capsys, "report", str(rows), "--out", str(out), "--title", "Evaluations")
    assert code == 0, err
    assert out.read_text().startswith("<!DOCTYPE html>") and "<title>Evaluations</title>" in out.read_text()
    assert str(out) in stdout


def test_a_corrupt_line_is_one_error_naming_file_and_line(capsys, tmp_path):
    path = tmp_path / "bench.jsonl"
    lines = [json.dumps(row) for row in bench_rows()[:3]]
    path.write_text("\n".join([lines[0], lines[1][:25], lines[2]]) + "\n")
    out = tmp_path / "report.html"
    code, _, err = run_cli(capsys, "report", str(path), "--out", str(out))
    assert code == 2 and _one_error_line(err).startswith(f"{path}:2: ")
    assert not out.exists()


def test_a_missing_file_is_one_error(capsys, tmp_path):
    good = write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])
    code, _, err = run_cli(capsys, "report", str(good), str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r.html"))
    assert code == 2 and _one_error_line(err) == f"{tmp_path / 'missing.jsonl'}: no such file or directory"


def test_no_input_is_one_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "report", "--out", str(tmp_path / "r.html"))
    assert code == 2 and _one_error_line(err).startswith("report: no results given")
