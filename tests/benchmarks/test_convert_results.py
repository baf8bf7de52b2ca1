"""convert_results.py turns rows of earlier versions (lines of the files once committed, in
old_rows/) into today's row types, which the report reads, with the values they had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.convert_results import main
from trainspeed.bench.measurement import MeasurementRow
from trainspeed.bench.results import ResultRow
from trainspeed.evaluate.rows import MahjongAgreementRow, MahjongEvalRow
from trainspeed.kinds import read_inputs
from trainspeed.studies.scaling.rows import ScalingRunRow
from trainspeed.train.rows import RunSummary

OLD = Path(__file__).parent / "old_rows"


def _old(name: str) -> list[dict]:
    return [json.loads(line) for line in (OLD / name).read_text().splitlines()]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("converted")
    for path in OLD.iterdir():
        shutil.copy(path, folder / path.name)
    assert main([str(path) for path in sorted(folder.iterdir())] + ["--note", "a test machine"]) == 0
    (folder / "quality.json").unlink()  # now the run directory beside it
    return folder


def test_every_old_row_becomes_a_row_the_report_reads(converted):
    inputs = read_inputs([converted])
    assert len(inputs.of(RunSummary)) == 1 and inputs.of(ScalingRunRow) and inputs.of(MahjongEvalRow) and inputs.of(MahjongAgreementRow) and inputs.of(MeasurementRow)
    assert {m.row.benchmark for m in inputs.of(MeasurementRow)} == {"loader", "loader-check-cost", "agents",
                                                              "stylegan3-saved-memory", "harness-overhead"}


def test_bench_rows_keep_their_values_and_move_the_machine_fields(converted):
    old = _old("bench_h200.jsonl")[0]
    (row,) = [r.row for r in read_inputs([converted / "bench_h200.jsonl"]).of(ResultRow)]
    assert (row.samples_per_s, row.mfu, row.peak_memory_bytes) == (old["samples_per_s"], old["mfu"], old["peak_memory_bytes"])
    assert (row.machine.torch_threads, row.machine.torch_version, row.machine.hostname) == (16, "2.11.0+cu130", "vm")
    assert row.machine.note == "a test machine" and row.machine.cores_usable is None and row.feed is None


def test_a_peer_row_joins_the_run_of_the_bench_row_measured_before_it(converted):
    rows = [json.loads(line) for line in (converted / "bench_cpu.jsonl").read_text().splitlines()]
    trainspeed, torch_peer, jax_peer = rows[1:]
    assert torch_peer["run_id"] == jax_peer["run_id"] == trainspeed["run_id"]
    assert torch_peer["invocation_run_id"] == _old("bench_cpu.jsonl")[2]["run_id"]
    assert rows[0]["run_id"] == _old("bench_cpu.jsonl")[0]["run_id"]


def test_an_old_stylegan3_row_is_a_bench_row_with_windows_of_one_step_and_its_variant_as_a_switch(converted):
    default, none = [r for r in read_inputs([converted / "stylegan3.jsonl"]).of(ResultRow)]
    old = _old("stylegan3.jsonl")[0]
    assert (default.row.size, none.row.size) == ("tiny-t", "tiny-t+recompute-none")
    assert default.row.samples_per_s == old["images_per_s"] and default.row.steps_per_window == 1
    assert default.row.samples_per_s_min == pytest.approx(old["batch_size"] / old["step_s_range"][1])
    assert default.get("s_per_kimg") == old["s_per_kimg"] and default.get("variant") == "activation"
    assert default.row.machine.load_average_end == old["load_average_1min"]
    assert none.series == "cpu:eager:fp32 [recompute-none]"


def test_training_rows_become_scaling_rows_and_a_quality_document_a_run_directory(converted):
    rows = [r.row for r in read_inputs([converted / "scaling.jsonl", converted / "train_cuda.jsonl"]).of(ScalingRunRow)]
    old = _old("scaling.jsonl")[0]
    first = rows[0]
    assert (first.study_id, first.world_size, first.data, first.target) == (old["run_id"], old["nproc"], old["data"],
                                                                             "cpu:eager:fp32")
    assert first.end_to_end_samples_per_s == old["end_to_end_samples_per_s"]
    cuda_real, cuda_synthetic = rows[-2:]
    assert (cuda_real.data, cuda_synthetic.data) == ("real", "synthetic") and cuda_real.world_size == 1
    assert cuda_synthetic.steady_samples_per_s == _old("train_cuda.jsonl")[0]["synthetic_samples_per_s"]
    (run,) = read_inputs([converted / "quality"]).of(RunSummary)
    assert run.row.validation == {k: v for k, v in json.loads((OLD / "quality.json").read_text())["validation"][-1].items()
                                      if k not in ("kind", "step")}
    assert [record.step for record in run.val_curve] == [200, 210] and run.row.paused_s is None


def test_evaluation_rows_get_their_evaluation_seed_and_within_deal_correlation(converted):
    inputs = read_inputs([converted / "eval.jsonl"])
    old = _old("eval.jsonl")
    assert [row.row.eval_seed for row in inputs.of(MahjongEvalRow)] == [row["seed"] for row in old]
    assert all(row.row.policy_seed is None and row.row.within_deal_correlation is not None for row in inputs.of(MahjongEvalRow))


def test_agreement_rows_written_before_versions_are_version_1_with_their_values(converted):
    inputs = read_inputs([converted / "agreement.jsonl"])
    old = _old("agreement.jsonl")
    assert [row.row.agreement for row in inputs.of(MahjongAgreementRow)] == [row["agreement"] for row in old]
    assert [row.row.discard_errors for row in inputs.of(MahjongAgreementRow)] == [row["discard_errors"] for row in old]
    assert all(row.row.machine.note == "a test machine" and row.row.workload_sha256 is None for row in inputs.of(MahjongAgreementRow))


def test_the_first_batch_size_studys_rows_are_refused_in_one_line(tmp_path, capsys):
    old = tmp_path / "batch.jsonl"
    old.write_text(json.dumps({"kind": "batch-study-config", "runs_dir": "r"}) + "\n")
    with pytest.raises(SystemExit, match="rerun `trainspeed study batch-size`"):
        main([str(old)])
    assert json.loads(old.read_text())["kind"] == "batch-study-config"


def test_a_converted_file_converts_to_itself(converted, tmp_path):
    copy = tmp_path / "again.jsonl"
    shutil.copy(converted / "eval.jsonl", copy)
    assert main([str(copy)]) == 0
    assert copy.read_text() == (converted / "eval.jsonl").read_text()
