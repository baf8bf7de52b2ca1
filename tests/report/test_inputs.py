"""What the report reads: every kind of row by the reader of its kind into its writer's dataclass,
real run directories, every committed result file, and bad input named by file and line."""

import json
import os
import re
from pathlib import Path

import pytest
from report_rows import SHA, bench, bench_rows, eval_row, write_every_kind, write_jsonl

from trainspeed.bench.measurement import MeasurementRow
from trainspeed.bench.results import ResultRow
from trainspeed.errors import UsageError
from trainspeed.evaluate.rows import MahjongAgreementRow, MahjongEvalRow, NullTestRow
from trainspeed.kinds import read_inputs
from trainspeed.studies.batch_size.report import ROW_TYPES as BATCH_SIZE_ROWS
from trainspeed.studies.batch_size.rows import (
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
    BatchSizeStrengthRow,
)
from trainspeed.studies.scaling.rows import ScalingRunRow
from trainspeed.train.rows import RunSummary

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"


def test_every_kind_is_read_into_its_writers_dataclass(tmp_path):
    inputs = read_inputs(write_every_kind(tmp_path))
    local = [row for row in inputs.of(ResultRow) if not row.is_remote]
    remote = [row for row in inputs.of(ResultRow) if row.is_remote]
    assert len(local) == len(bench_rows()) + 2 and len(remote) == 2
    assert remote[0].row.link == "loopback" and remote[0].row.machine.cpu_model == "Test CPU"
    assert len(inputs.of(MahjongEvalRow)) == 3 and isinstance(inputs.of(MahjongEvalRow)[0].row, MahjongEvalRow)
    assert len(inputs.of(MahjongAgreementRow)) == 2 and inputs.of(MahjongAgreementRow)[1].row.agreement["discard"] == 0.97
    assert len(inputs.of(NullTestRow)) == 1 and inputs.of(NullTestRow)[0].row.covered == 19
    kinds = [type(read.row) for read in inputs.of(*BATCH_SIZE_ROWS)]
    assert kinds[0] is BatchSizeSettingsRow and kinds.count(BatchSizeRunRow) == 4 and kinds[-1] is BatchSizeComparisonRow
    assert kinds.count(BatchSizeStrengthRow) == 6 and inputs.of(*BATCH_SIZE_ROWS)[0].row.power.seeds == 2
    assert inputs.of(*BATCH_SIZE_ROWS)[0].row.settings.batches == (256, 2048)
    assert len(inputs.of(ScalingRunRow)) == 4 and len(inputs.of(MeasurementRow)) == 2


def test_extra_fields_flow_through(tmp_path):
    inputs = read_inputs([write_jsonl(tmp_path / "b.jsonl", bench_rows())])
    compiled = next(row for row in inputs.of(ResultRow) if row.row.target == "cpu:compile:fp32" and row.row.batch_size == 64)
    assert compiled.get("lrelu_path") == "plain" and compiled.command.startswith("trainspeed bench")


@pytest.mark.e2e
@pytest.mark.slow
def test_a_run_directory_written_by_trainspeed_train_is_read_with_its_curves(tiny_run, classifier_run):
    """The trainer's metrics.jsonl ends with its summary row, which has no step: the report read
    it as a metrics row and refused every real run directory."""
    inputs = read_inputs([tiny_run, classifier_run])
    mahjong, classifier = inputs.of(RunSummary)
    assert isinstance(mahjong.summary, RunSummary) and mahjong.summary.world_size == 1
    assert [record.step for record in mahjong.train_curve] == [2, 4, 6]
    assert [record.step for record in mahjong.val_curve] == [3, 6]
    assert {"loss", "accuracy"} <= set(mahjong.val_curve[0].metrics)
    assert classifier.summary.world_size == 2 and set(classifier.val_curve[-1].metrics) == {"top1_accuracy", "mean_loss"}
    assert mahjong.summary.machine.cores_usable >= 1 and mahjong.summary.workload_sha256
    assert classifier.summary.workload_module == "image_classifier_workload"


@pytest.mark.e2e
@pytest.mark.slow
def test_a_folder_of_result_files_and_run_directories_is_read_one_level_deep(tmp_path, tiny_run):
    import shutil

    folder = tmp_path / "study"
    write_every_kind(folder)
    shutil.copytree(tiny_run, folder / "run")
    (folder / "deeper").mkdir()
    shutil.copytree(tiny_run, folder / "deeper" / "run")
    inputs = read_inputs([folder])
    assert len(inputs.of(RunSummary)) == 1 and len(inputs.of(MahjongEvalRow)) == 3 and inputs.of(ResultRow)


def test_every_committed_result_file_is_read():
    """docs/results holds rows of known kinds only: every .jsonl and .json file and run directory."""
    inputs = read_inputs([RESULTS])
    files = {path.resolve() for path in RESULTS.iterdir() if path.suffix in (".jsonl", ".json")}
    assert files <= inputs.read
    assert {row.row.workload for row in inputs.of(ResultRow)} == {
        "mahjong", "stylegan3", "charlm", "timm:resnet50", "timm:vit_small_patch16_224", "torchvision:resnet18", "hf:gpt2",
        "timm:resnet18", "small-cnn", "hf:llama", "hf:bert", "user_lstm_lm", "user_gru_lm", "timm:deit_small_patch16_224",
        "timm:efficientnet_b0", "timm:convnext_tiny", "timm:mobilenetv3_large_100",
        "hf:distilbert", "hf:roberta", "timm:swin_tiny_patch4_window7_224"}
    assert any(run.row.workload == "charlm" and "bits_per_char" in run.val_curve[-1].metrics for run in inputs.of(RunSummary))
    assert inputs.of(ScalingRunRow) and inputs.of(RunSummary) and inputs.of(MahjongEvalRow) and inputs.of(*BATCH_SIZE_ROWS) and inputs.of(MeasurementRow)
    assert inputs.of(MahjongAgreementRow) and inputs.of(NullTestRow)


def test_every_committed_result_file_is_an_input_of_make_report():
    makefile = (REPO / "Makefile").read_text()
    block = makefile[makefile.index("REPORT_INPUTS :="):].split("\n\n")[0]
    listed = {RESULTS / name for name in re.findall(r"\$\(RESULTS\)/(\S+)", block)}
    committed = {path for path in RESULTS.iterdir() if path.suffix in (".jsonl", ".json") or (path / "summary.json").is_file()
                 or (path.is_dir() and any(child.suffix in (".jsonl", ".json") for child in path.iterdir()))}
    assert listed == committed


def _error(paths):
    with pytest.raises(UsageError) as caught:
        read_inputs(paths)
    return str(caught.value)


def test_a_corrupt_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "b.jsonl"
    lines = [json.dumps(row) for row in bench_rows()[:3]]
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:40] + "\n")
    assert _error([path]).startswith(f"{path}:3: not a trainspeed result row (not JSON: ")


def test_a_row_of_an_unknown_kind_or_version_or_without_either_is_named(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [bench_rows()[0], {"kind": "match", "schema_version": 1, "games": 100}])
    assert _error([path]).startswith(f"{path}:2: a row of kind 'match', which the report does not read")
    path = write_jsonl(tmp_path / "v.jsonl", [{**bench_rows()[0], "schema_version": 7}])
    assert _error([path]) == (f"{path}:1: a bench row of schema_version 7; this trainspeed reads version 1 of it "
                              "(use the trainspeed that wrote it, or rewrite the row)")
    old = {k: v for k, v in bench_rows()[0].items() if k not in ("kind", "schema_version")}
    path = write_jsonl(tmp_path / "old.jsonl", [old])
    assert "benchmarks/convert_results.py" in _error([path])


def test_a_field_of_the_wrong_type_is_named(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{**bench_rows()[0], "samples_per_s": "fast"}])
    assert _error([path]) == f'{path}:1: bench row: field samples_per_s must be float | None, not "fast"'
    path = write_jsonl(tmp_path / "m.jsonl", [{**bench_rows()[0], "machine": {"cores_usable": "two"}}])
    assert _error([path]).startswith(f"{path}:1: bench row: field machine")
    path = write_jsonl(tmp_path / "e.jsonl", [{**eval_row("p", 1, 2.4), "rank_distribution": "all first"}])
    assert _error([path]).startswith(f"{path}:1: mahjong-eval row: field rank_distribution must be list[float]")


def test_json_nested_too_deeply_and_binary_files_are_one_error(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert _error([deep]) == f"{deep}:1: JSON nested too deeply to be a row"
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    assert _error([binary]) == f"{binary}: not a text file of JSON rows (it is not UTF-8)"


def test_a_missing_file_and_no_input_are_one_clear_error(tmp_path):
    assert _error([tmp_path / "nope.jsonl"]) == f"{tmp_path / 'nope.jsonl'}: no such file or directory"
    assert _error([]).startswith("report: no results given")
    assert "without summary.json, result files" in _error([tmp_path])


def test_a_pipe_or_a_device_is_not_a_results_file(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    device = tmp_path / "zeros.jsonl"
    device.symlink_to("/dev/zero")
    for path in (fifo, device):
        assert _error([path]) == (f"{path}: not a regular file (a pipe, a device or the like); give a result file, "
                                  "a run directory or a folder of them")


def test_a_run_directory_that_never_finished_a_step_says_it_has_no_rows_yet(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text("{}\n")
    assert _error([run]) == (f"{run}: a run directory without rows yet (its training wrote no summary.json: it "
                             "failed or was stopped before it finished a step); see its logs, or train it first")


def test_workloads_of_one_name_but_two_definitions_are_two_groups(tmp_path):
    """Two users' `charlm` never share a line or a ratio: the rows record a hash of each definition."""
    mine = [bench("cpu:eager:fp32", 64, workload="charlm", workload_sha256="11" * 32),
            bench("cpu:compile:fp32", 64, workload="charlm", workload_sha256="11" * 32, samples_per_s=2000.0)]
    theirs = [bench("cpu:compile:fp32", 64, workload="charlm", workload_sha256="22" * 32, samples_per_s=500.0,
                    run_id="r1")]
    labels = {row.workload_label for row in read_inputs([write_jsonl(tmp_path / "c.jsonl", mine + theirs)]).of(ResultRow)}
    assert labels == {"charlm@111111111111 tiny", "charlm@222222222222 tiny"}
    assert bench_rows()[0]["workload_sha256"] == SHA
