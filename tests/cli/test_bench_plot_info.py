"""The bench, plot and info commands as a user runs them."""

import json

import pytest

from trainspeed.cli import main
from trainspeed.targets import all_target_names, available_targets


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--targets", "cpu:eager"], "bad target 'cpu:eager'"),
        (["--targets", "gpu:eager:fp32"], "unknown device 'gpu'"),
        (["--batch-sizes", "0,64"], "must be a positive integer"),
        (["--batch-sizes", "-8"], "must be a positive integer"),
        (["--batch-sizes", "lots"], "--batch-sizes 'lots': give batch sizes from 1 to 2^40"),
        (["--batch-sizes", "2^-1"], "--batch-sizes '2^-1': give batch sizes from 1 to 2^40"),
        (["--batch-sizes", "64.5"], "--batch-sizes '64.5': give batch sizes from 1 to 2^40"),
        (["--workload", "chess"], "unknown workload 'chess'"),
        (["--workload", "no_such_module:factory"], "--workload no_such_module:factory: cannot import 'no_such_module'"),
        (["--size", "huge"], "--size 'huge' is not a size of workload mahjong"),
        (["--baseline", "cpu:eager:bf16"], "--baseline cpu:eager:bf16 is not among --targets"),
        (["--feed", "sideways"], "--feed 'sideways': give device (one batch kept on the device), host"),
        (["--feed", "host,sideways"], "--feed 'host,sideways': give device"),
        (["--feed", "host,host"], "--feed 'host,host': give device"),
        (["--feed", "host,host"], "; 'host' is named twice"),
        (["--min-steps-per-window", "0"], "--min-steps-per-window must be between 1"),
        (["--min-steps-per-window", "9", "--max-steps-per-window", "4"], "--min-steps-per-window must be between 1"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(capsys, tmp_results, argv, fragment):
    code, out, err = run_cli(capsys, "bench", "--targets", "cpu:eager:fp32", "--out", str(tmp_results), "--no-progress", *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainspeed: error:") and fragment in lines[0], err
    assert not tmp_results.exists()


def test_bench_writes_rows_csv_ratio_table_and_plot(capsys, tmp_results):
    code, out, err = run_cli(
        capsys, "bench", "--workload", "mahjong", "--size", "tiny",
        "--targets", "cpu:eager:fp32,cpu:eager:bf16", "--batch-sizes", "2^3..2^4",
        "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1", "--out", str(tmp_results), "--no-progress",
        "--peak-tflops", "1",  # no probe of the peak (1.5 s per target): the next test runs it
    )
    assert code == 0, err
    rows = [json.loads(line) for line in tmp_results.read_text().splitlines()]
    assert {(r["target"], r["batch_size"]) for r in rows} == {
        (t, b) for t in ("cpu:eager:fp32", "cpu:eager:bf16") for b in (8, 16)
    }
    assert all(r["status"] == "ok" and r["samples_per_s"] > 0 for r in rows)
    assert all(r["command"].startswith("trainspeed bench --workload mahjong --size tiny --targets") for r in rows)
    assert "ratio to cpu:eager:fp32" in out and "(1.00x)" in out
    assert tmp_results.with_suffix(".csv").read_text().count("\n") == 5
    assert tmp_results.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    code, out, err = run_cli(capsys, "plot", str(tmp_results), "--baseline", "cpu:eager:bf16", "--out", str(tmp_results.parent / "again"))
    assert code == 0, err
    svg = (tmp_results.parent / "again.svg").read_text()
    assert "throughput ratio to cpu:eager:bf16" in svg


def test_both_feeds_run_back_to_back_for_every_configuration(capsys, tmp_results):
    """Without --peak-tflops, on a CPU (no nominal peak): the bench measures the peak its rows' MFU is against."""
    code, out, err = run_cli(
        capsys, "bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32",
        "--batch-sizes", "8,16", "--feed", "device,host", "--windows", "1", "--min-window-s", "0.01",
        "--warmup-steps", "1", "--out", str(tmp_results), "--no-progress", "--no-plot",
    )
    assert code == 0, err
    rows = [json.loads(line) for line in tmp_results.read_text().splitlines()]
    assert [(r["batch_size"], r["feed"]) for r in rows] == [(8, "device"), (8, "host"), (16, "device"), (16, "host")]
    assert [r["bytes_per_step"] > 0 for r in rows] == [False, True, False, True]
    assert "cpu:eager:fp32 host-fed" in out
    assert all(r["peak_tflops_source"] == "measured" and r["peak_tflops"] > 0 for r in rows)
    assert all(r["measured_peak_tflops"] == r["peak_tflops"] and r["nominal_peak_chip"] is None for r in rows)


def test_plot_of_a_corrupt_results_file_names_the_line(capsys, tmp_results):
    tmp_results.write_text('{"run_id": "x"}\nnot json\n')
    code, out, err = run_cli(capsys, "plot", str(tmp_results))
    assert code == 2 and f"{tmp_results}:2: not a trainspeed result row" in err


def test_info_lists_every_target_with_a_reason_when_unavailable(capsys):
    code, out, err = run_cli(capsys, "info")
    assert code == 0
    lines = out.splitlines()
    workloads = lines.index("workloads:")
    status = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:workloads]}
    families = {line.split()[0]: line.split(None, 1)[1] for line in lines[workloads + 1:]}
    assert families["built-in"] == "mahjong, stylegan3"
    assert families["timm:NAME"].endswith("models of timm, e.g. timm:resnet50")
    assert families["hf:MODEL_TYPE"].endswith("models of transformers, e.g. hf:gpt2")
    assert set(status) == set(all_target_names())
    for name, reason in available_targets().items():
        assert status[name] == ("available" if reason is None else f"unavailable: {reason}")
    assert status["cpu:eager:fp32"] == "available"


def test_a_results_file_with_a_cut_line_is_refused_before_measuring(capsys, tmp_results):
    tmp_results.write_text('{"run_id": "a", "timestamp": "t", "workload": "mahjong", "size": "tiny", "tar')
    before = tmp_results.read_bytes()
    code, out, err = run_cli(capsys, "bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "8",
                             "--no-progress", "--out", str(tmp_results))
    assert code == 2 and f"--out {tmp_results}: line 1: not valid JSON (Unterminated string" in err
    assert tmp_results.read_bytes() == before  # nothing was measured or appended


def test_a_row_is_never_glued_onto_a_last_line_without_newline(capsys, tmp_results):
    code, out, err = run_cli(capsys, "bench", "--size", "tiny", "--targets", "cpu:eager:fp32", "--batch-sizes", "8",
                             "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1", "--peak-tflops", "1",
                             "--no-progress", "--no-plot", "--out", str(tmp_results))
    assert code == 0, err
    tmp_results.write_bytes(tmp_results.read_bytes().rstrip(b"\n"))
    code, out, err = run_cli(capsys, "bench", "--size", "tiny", "--targets", "cpu:eager:fp32", "--batch-sizes", "8",
                             "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1", "--peak-tflops", "1",
                             "--no-progress", "--no-plot", "--out", str(tmp_results))
    assert code == 0, err
    assert [json.loads(line)["status"] for line in tmp_results.read_text().splitlines()] == ["ok", "ok"]


def test_plot_of_eval_rows_draws_their_strength_with_the_machine_under_it(capsys, tmp_path):
    from tests.report.report_rows import eval_row

    results = tmp_path / "eval.jsonl"
    results.write_text("".join(json.dumps(eval_row("tiny", step, rank)) + "\n" for step, rank in ((10, 3.6), (320, 2.5))))
    code, out, err = run_cli(capsys, "plot", str(results))
    assert code == 0, err
    assert out.split() == [str(tmp_path / "eval.png"), str(tmp_path / "eval.svg")]
    svg = (tmp_path / "eval.svg").read_text()
    assert "2 rows: Test CPU, 2 of 4 cores usable" in svg and "tiny @320 vs rule-based" in svg
    code, _, err = run_cli(capsys, "plot", str(results), "--baseline", "cpu:eager:fp32")
    assert code == 2 and "--baseline and --run-id are for bench rows" in err


def test_plot_of_a_batch_size_study_draws_the_reports_study_figure(capsys, tmp_path):
    from tests.report.report_rows import batch_size_rows

    results = tmp_path / "batch_size.jsonl"
    results.write_text("".join(json.dumps(row) + "\n" for row in batch_size_rows()))
    code, out, err = run_cli(capsys, "plot", str(results), "--out", str(tmp_path / "study"))
    assert code == 0, err
    assert out.split() == [str(tmp_path / "study.png"), str(tmp_path / "study.svg")]
    assert "Test CPU, 2 of 4 cores usable" in (tmp_path / "study.svg").read_text()
