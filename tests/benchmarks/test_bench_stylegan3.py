"""bench_stylegan3.py writes trainspeed's bench rows, which every reader of result files reads."""

import json

import pytest

from benchmarks.bench_stylegan3 import Case, measure
from trainspeed.bench.results import read_rows
from trainspeed.report.inputs import read_inputs


@pytest.mark.slow
def test_a_stylegan3_row_is_a_bench_row_with_its_own_fields(tmp_path):
    row = measure(Case("tiny-t", 2, "activation"), "cpu:eager:fp32", threads=1, steps=2, run_id="r", command="python x")
    path = tmp_path / "stylegan3.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (bench,) = read_rows(path)
    assert (bench.workload, bench.size, bench.target, bench.batch_size, bench.status) == ("stylegan3", "tiny-t", "cpu:eager:fp32", 2, "ok")
    assert bench.samples_per_s_min <= bench.samples_per_s <= bench.samples_per_s_max and len(bench.window_s) == 2
    assert bench.samples_per_s == pytest.approx(2 / bench.step_time_s) and bench.command == "python x"
    (reported,) = read_inputs([path]).bench
    assert reported.variant == "activation" and reported.get("s_per_kimg") == pytest.approx(1000 * bench.step_time_s / 2, abs=0.1)
    assert reported.get("peak_host_rss_bytes") > 0
