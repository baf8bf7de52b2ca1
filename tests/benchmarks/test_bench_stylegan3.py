"""bench_stylegan3.py measures with trainspeed bench's own sweep in a fresh process per case and adds
StyleGAN3's fields; the rows are bench rows whose variant is the size's switch."""

import pytest

from benchmarks.bench_stylegan3 import Case, main, parse_cases
from trainspeed.bench.results import ResultRow
from trainspeed.kinds import read_inputs


def test_a_variant_is_the_sizes_switch():
    assert [case.sized for case in parse_cases("tiny-t:4", "activation,none,matmul+channels-last")] == [
        "tiny-t", "tiny-t+recompute-none", "tiny-t+fir-matmul+channels-last"]
    assert Case("t256", 32, "triton").sized == "t256+triton-lrelu"
    with pytest.raises(SystemExit, match="unknown variant 'fast'"):
        parse_cases("tiny-t:4", "fast")


@pytest.mark.slow
def test_a_stylegan3_row_is_a_bench_row_with_its_own_fields(tmp_path):
    out = tmp_path / "stylegan3.jsonl"
    assert main(["--cases", "tiny-t:2", "--variants", "activation,none", "--threads", "1", "--windows", "2",
                 "--min-window-s", "0.01", "--out", str(out)]) == 0
    default, none = read_inputs([out]).of(ResultRow)
    row = default.row
    assert (row.workload, row.size, row.target, row.batch_size, row.status) == ("stylegan3", "tiny-t", "cpu:eager:fp32", 2, "ok")
    assert row.samples_per_s_min <= row.samples_per_s <= row.samples_per_s_max and len(row.window_s) == 2
    assert row.samples_per_s == pytest.approx(2 / row.step_time_s) and row.command.startswith("python ")
    assert default.get("variant") == "activation" and default.get("s_per_kimg") == pytest.approx(1000 / row.samples_per_s, abs=0.1)
    assert default.get("peak_host_rss_bytes") > 0 and default.get("lrelu_path") == "plain"
    assert none.row.size == "tiny-t+recompute-none" and none.series == "cpu:eager:fp32 [recompute-none]"
    assert row.run_id == none.row.run_id  # one invocation: one run
