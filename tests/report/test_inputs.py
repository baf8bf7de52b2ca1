"""What the report reads: every kind of row recognised by its fields, extra fields kept, old
files still read, and bad input named by file and line."""

import json
import re
from pathlib import Path

import pytest

from report_rows import OLD_STYLEGAN3_ROW, bench, bench_rows, remote_rows, write_every_kind, write_jsonl
from trainspeed.errors import UsageError
from trainspeed.report.inputs import read_inputs

REPO = Path(__file__).resolve().parents[2]


def test_every_kind_is_recognised_by_its_fields(tmp_path):
    inputs = read_inputs(write_every_kind(tmp_path))
    local = [row for row in inputs.bench if not row.is_remote]
    remote = [row for row in inputs.bench if row.is_remote]
    assert len(local) == len(bench_rows()) + 1 and len(remote) == 2
    assert remote[0].local_target == "cpu:eager:fp32" and remote[0].get("link") == "loopback"
    switched = read_inputs([write_jsonl(tmp_path / "r.jsonl", [{**remote_rows()[0],
                                                                "target": "remote:10.0.0.2:50051/cuda:eager:bf16/in-flight=2"}])])
    assert switched.bench[0].local_target == "cuda:eager:bf16"
    assert len(inputs.evals) == 2 and len(inputs.study) == 4
    assert sorted(run.get("world_size") for run in inputs.runs) == [1, 2]
    two = next(run for run in inputs.runs if run.get("world_size") == 2)
    assert [p.step for p in two.train_curve] == [5, 10, 15, 20] and [p.step for p in two.val_curve] == [10, 20]


def test_extra_fields_flow_through(tmp_path):
    inputs = read_inputs([write_jsonl(tmp_path / "b.jsonl", bench_rows())])
    compiled = next(row for row in inputs.bench if row.row.target == "cpu:compile:fp32" and row.row.batch_size == 64)
    assert compiled.get("lrelu_path") == "plain" and compiled.command.startswith("trainspeed bench")


def test_an_old_stylegan3_row_reads_as_a_bench_row(tmp_path):
    (row,) = read_inputs([write_jsonl(tmp_path / "old.jsonl", [OLD_STYLEGAN3_ROW])]).bench
    assert (row.row.workload, row.row.size, row.row.target, row.row.batch_size, row.row.status) == (
        "stylegan3", "tiny-t", "cpu:eager:fp32", 4, "ok")
    assert row.row.samples_per_s == pytest.approx(11.2797)
    assert row.row.samples_per_s_min == pytest.approx(4 / 0.361) and row.row.samples_per_s_max == pytest.approx(4 / 0.348)
    assert row.row.peak_memory_bytes == round(1.5 * 2**30) and row.row.flops_per_sample == 1693500504.0
    assert row.get("s_per_kimg") == 88.7 and row.get("lrelu_path") == "plain" and row.variant == "activation"
    assert row.series == "cpu:eager:fp32 [activation]"


def test_the_committed_stylegan3_files_load():
    paths = sorted((REPO / "docs" / "results").glob("stylegan3_*.jsonl"))
    paths = [p for p in paths if "saved_memory" not in p.name]
    inputs = read_inputs(paths)
    assert inputs.bench and all(row.row.workload == "stylegan3" and row.row.is_measured for row in inputs.bench)
    h200 = [row for row in inputs.bench if row.row.device_name == "NVIDIA H200"]
    assert h200 and all(row.row.peak_memory_bytes > 2**30 for row in h200)


def _error(paths):
    with pytest.raises(UsageError) as caught:
        read_inputs(paths)
    return str(caught.value)


def test_a_corrupt_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "b.jsonl"
    lines = [json.dumps(row) for row in bench_rows()[:3]]
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:40] + "\n")
    assert _error([path]).startswith(f"{path}:3: not JSON")


def test_a_row_of_no_known_kind_is_named(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [bench_rows()[0], {"match": "rule_vs_random", "games": 100}])
    message = _error([path])
    assert message.startswith(f"{path}:2: ") and "none of what the report reads" in message


def test_a_bench_row_with_an_unknown_status_is_named(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [{**bench_rows()[0], "status": "fine"}])
    assert _error([path]) == f"{path}:1: unknown status 'fine' (one of ok, invalid, oom, skipped, error)"


def test_a_missing_file_and_no_input_are_one_clear_error(tmp_path):
    assert _error([tmp_path / "nope.jsonl"]) == f"{tmp_path / 'nope.jsonl'}: no such file or directory"
    assert _error([]).startswith("report: no results given")
    assert "without summary.json" in _error([tmp_path])


def test_every_input_of_make_report_loads():
    """`make report` reads the committed rows listed in the Makefile; each must load."""
    makefile = (REPO / "Makefile").read_text()
    block = makefile[makefile.index("REPORT_INPUTS :="):].split("\n\n")[0]
    paths = [REPO / "docs" / "results" / name for name in re.findall(r"\$\(RESULTS\)/(\S+)", block)]
    assert len(paths) >= 10
    inputs = read_inputs(paths)
    assert {row.row.workload for row in inputs.bench} == {"mahjong", "stylegan3"} and len(inputs.runs) >= 10


def test_the_batch_size_study_scripts_rows_are_read(tmp_path):
    """benchmarks/batch_size_study.py writes its runs, batches, comparisons and settings under kinds
    of its own, with peak_lr and train_wall_s for lr and wall_s."""
    rows = [
        {"kind": "batch-study-config", "command": "python benchmarks/batch_size_study.py --data d", "size": "tiny"},
        {"kind": "batch-study-run", "global_batch": 256, "peak_lr": 0.001, "seed": 0, "val_loss": 1.3, "val_accuracy": 0.55,
         "equal_steps_val_loss": 1.4, "equal_steps_val_accuracy": 0.5, "train_wall_s": 120.0},
        {"kind": "batch-study-batch", "global_batch": 256, "peak_lr": 0.001, "seeds": [0, 1], "val_loss": 1.31,
         "mean_rank": 2.4, "mean_rank_ci95": [2.3, 2.5]},
        {"kind": "batch-study-comparison", "global_batch": 8192, "versus_batch": 256, "mean_rank_difference": -0.05,
         "ci95": [-0.1, 0.0], "deals": 250},
    ]
    study = read_inputs([write_jsonl(tmp_path / "study.jsonl", rows)]).study
    assert [row.role for row in study] == ["config", "run", "batch", "comparison"]
    run, batch = study[1], study[2]
    assert (run.get("lr"), run.get("wall_s"), run.seed_label) == (0.001, 120.0, "0")
    assert batch.rank_interval == (2.3, 2.5) and batch.seed_label == "mean of seeds 0,1"


def test_a_remote_row_pairs_with_the_local_row_of_its_own_run_and_each_feed_is_its_own_line(tmp_path):
    """A newer local row from another file must not stand in for the one measured beside it."""
    from trainspeed.report.figures import remote_pairs

    remote = remote_rows()[0]
    rows = [
        {**bench("cpu:eager:fp32", 64, samples_per_s=900.0), "run_id": "side-by-side", "feed": "host"},
        {**remote, "run_id": "side-by-side", "feed": "host"},
        {**remote, "run_id": "side-by-side", "feed": "device", "samples_per_s": 880.0},
        {**bench("cpu:eager:fp32", 64, samples_per_s=1800.0), "run_id": "later", "feed": "host",
         "timestamp": "2027-01-01T00:00:00+00:00"},
    ]
    pairs = remote_pairs(read_inputs([write_jsonl(tmp_path / "r.jsonl", rows)]).bench)
    host = next(p for p in pairs if p.remote.row.feed == "host")
    assert host.local.row.run_id == "side-by-side" and host.ratio == pytest.approx(900.0 / 300.0)
    assert len({p.series for p in pairs}) == 2 and all("-fed)" in p.series for p in pairs)
