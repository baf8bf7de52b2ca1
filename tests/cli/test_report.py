"""`trainspeed report` as a user runs it: a page, or one error line and exit code 2."""

import json
from pathlib import Path

import pytest

from tests.report.report_rows import bench, bench_rows, eval_row, write_jsonl
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


# --- bad input: one line and exit 2, before anything is written -----------------------------------

def test_an_output_that_is_one_of_the_inputs_is_refused_before_anything_is_written(capsys, tmp_path, monkeypatch):
    rows = write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])
    before = rows.read_bytes()
    monkeypatch.chdir(tmp_path)
    for out in (str(rows), "./e.jsonl", "../" + tmp_path.name + "/e.jsonl"):
        code, _, err = run_cli(capsys, "report", str(rows), "--out", out)
        assert code == 2 and _one_error_line(err) == f"--out {Path(out)} is one of the inputs; write the page to another file"
    (tmp_path / "link.jsonl").symlink_to(rows)
    code, _, err = run_cli(capsys, "report", "link.jsonl", "--out", str(rows))
    assert code == 2 and "is one of the inputs" in _one_error_line(err)
    assert rows.read_bytes() == before


def test_an_output_naming_a_directory_is_one_error(capsys, tmp_path):
    rows = write_jsonl(tmp_path / "e.jsonl", [eval_row("p", 1, 2.4)])
    code, _, err = run_cli(capsys, "report", str(rows), "--out", str(tmp_path))
    assert code == 2 and _one_error_line(err) == (f"--out {tmp_path} is a directory; name the HTML file, "
                                                  f"e.g. {tmp_path / 'report.html'}")


@pytest.mark.parametrize("name", ["$x$", "$", "a$b$$c", r"$\frac{1}{$", "price: $5 and $6"])
def test_dollar_signs_in_target_and_workload_names_are_text(capsys, tmp_path, name):
    """matplotlib reads $...$ as mathtext: an unbalanced one raised a ParseException from the page."""
    rows = [bench("cpu:eager:fp32", 64), bench(f"cpu:eager:fp32{name}", 64, workload=f"w{name}"),
            bench(f"{name}:eager:fp32", 64)]
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    code, _, err = run_cli(capsys, "report", str(path), "--out", str(tmp_path / "r.html"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "plot", str(path), "--out", str(tmp_path / "plot"))
    assert code == 0, err
    assert name.replace("&", "&amp;") in (tmp_path / "plot.svg").read_text().replace("&#36;", "$")


@pytest.mark.parametrize(("change", "message"), [
    ({"samples_per_s": "fast"}, 'field samples_per_s must be float | None, not "fast"'),
    ({"batch_size": "64"}, 'field batch_size must be int, not "64"'),
    ({"status": 3}, "field status must be str, not 3"),
    ({"window_s": [0.5, "long"]}, "field window_s must be list[float] | None"),
    ({"machine": [1, 2]}, "field machine must be"),
    ({"machine": {"hostname": 5}}, "field machine.hostname must be str | None, not 5"),
])
def test_a_known_field_of_the_wrong_type_is_one_error_naming_it(capsys, tmp_path, change, message):
    path = write_jsonl(tmp_path / "b.jsonl", [{**bench_rows()[0], **change}])
    for command in ("report", "plot"):
        code, _, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out.html"))
        line = _one_error_line(err)
        assert code == 2 and line.startswith(f"{path}:1: bench row: ") and message in line, line
    assert not (tmp_path / "out.html").exists()


def test_json_nested_too_deeply_is_one_error(capsys, tmp_path):
    for depth, name in ((100_000, "array.jsonl"), (3_000, "object.jsonl")):
        path = tmp_path / name
        path.write_text('{"a": ' * depth + "1" + "}" * depth + "\n" if name == "object.jsonl"
                        else "[" * depth + "]" * depth + "\n")
        for command in ("report", "plot"):
            code, _, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out"))
            assert code == 2 and str(path) in _one_error_line(err), err


def test_a_binary_file_is_one_error(capsys, tmp_path):
    path = tmp_path / "figure.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    for command in ("report", "plot"):
        code, _, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out"))
        assert code == 2 and _one_error_line(err) == f"{path}: not a text file of JSON rows (it is not UTF-8)"


def test_plot_refuses_an_output_naming_a_directory_or_its_own_input(capsys, tmp_path):
    rows = write_jsonl(tmp_path / "bench.svg", bench_rows()[:2])
    before = rows.read_bytes()
    code, _, err = run_cli(capsys, "plot", str(rows))
    assert code == 2 and _one_error_line(err) == f"--out {rows} is one of the inputs; write the page to another file"
    code, _, err = run_cli(capsys, "plot", str(rows), "--out", str(tmp_path))
    assert code == 2 and _one_error_line(err).startswith(f"--out {tmp_path} is a directory; give a stem")
    assert rows.read_bytes() == before


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _committed_with(tmp_path: Path, name: str, kind: str, change: dict) -> tuple[Path, int]:
    """A committed rows file with one field of its first row of `kind` changed; that row's line."""
    records = [json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()]
    line = next(number for number, record in enumerate(records, start=1) if record["kind"] == kind)
    records[line - 1] = {**records[line - 1], **change}
    return write_jsonl(tmp_path / name, records), line


@pytest.mark.parametrize(("name", "kind", "change", "message"), [
    ("plan_charlm.jsonl", "plan-check", {"measured_s": 0}, "field measured_s must be a positive finite number"),
    ("plan_charlm.jsonl", "plan-check", {"predicted_s_ci95": [float("inf"), float("nan")]},
     "field predicted_s_ci95[0] must be a positive finite number, not Infinity"),
    ("plan_charlm.jsonl", "plan", {"global_batch": 0}, "field global_batch must be a whole number from 1 to 1099511627776"),
    ("plan_charlm.jsonl", "plan", {"global_batch": 2**70}, "field global_batch must be a whole number from 1 to "),
    ("plan_charlm.jsonl", "plan", {"predicted_s": -3.5}, "field predicted_s must be a positive finite number"),
    ("time_to_target_study_charlm.jsonl", "time-to-target-study-fit", {"draws": []},
     "field draws must be a list of one or more draws, not []"),
    ("time_to_target_study_charlm.jsonl", "time-to-target-study-fit", {"s_min": float("nan")},
     "field s_min must be a finite number of at least 0, not NaN"),
    ("time_to_target_study_charlm.jsonl", "time-to-target-study-batch", {"steps_per_seed": [float("nan"), 2.0]},
     "field steps_per_seed[0] must be a positive finite number, not NaN"),
    ("time_to_target_study_charlm.jsonl", "time-to-target-study-run", {"global_batch": -8},
     "field global_batch must be a whole number from 1 to 1099511627776"),
], ids=["measured-0", "interval-inf-nan", "batch-0", "batch-2^70", "negative-time", "fit-without-draws", "fit-nan",
        "steps-nan", "negative-batch"])
def test_plan_and_study_rows_out_of_range_are_one_error_naming_file_line_and_field(capsys, tmp_path, name, kind,
                                                                                  change, message):
    """Well-typed numbers out of range once reached the figures: a traceback from numpy or matplotlib."""
    path, line = _committed_with(tmp_path, name, kind, change)
    for command in ("report", "plot"):
        code, _, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out.html"))
        said = _one_error_line(err)
        assert code == 2 and said.startswith(f"{path}:{line}: {kind} row: {message}"), said
    assert list(tmp_path.iterdir()) == [path]


def test_report_and_plot_never_import_a_module_the_rows_name(capsys, tmp_path, monkeypatch):
    """Rows are data: a workload name in them is shown, never imported, even with the module beside them."""
    module = "rows_named_module_for_the_report"
    (tmp_path / f"{module}.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    records = [json.loads(line) for line in (RESULTS / "time_to_target_study_charlm.jsonl").read_text().splitlines()]
    for record in records:
        for holder in (record, record.get("settings") or {}):
            if "workload" in holder:
                holder["workload"] = f"{module}:Workload"
    path = write_jsonl(tmp_path / "study.jsonl", records)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for command in ("report", "plot"):
        code, _, err = run_cli(capsys, command, str(path), "--out", str(tmp_path / "out"))
        assert code == 0, err
    assert not (tmp_path / "imported").exists()
