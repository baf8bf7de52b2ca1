"""row_ranges.py prints the ranges the pages quote from the rows, each ratio within its own run."""

from pathlib import Path

from benchmarks.row_ranges import main
from trainspeed.bench.results import read_rows

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_ranges_of_the_cpu_sweep_and_the_peers_come_from_their_rows(capsys):
    assert main([str(RESULTS / "bench_cpu_mahjong_tiny.jsonl"), str(RESULTS / "reference_cpu_mahjong_tiny.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "cpu:eager:bf16: ratio 0.73 - 1.08 over 7 batch sizes" in printed
    assert "xla:lazy:fp32: ratio 0.80 - 1.76 over 7 batch sizes; CPU s per wall s 1.34 - 1.74" in printed
    assert ("reference-torch:cpu:eager:fp32: ratio 0.96 - 0.97 over 2 batch sizes; CPU s per wall s 1.00; "
            "windows 2,035 - 2,362 samples/s") in printed
    assert "reference-jax:cpu:jit:fp32: ratio 0.63 - 0.66 over 2 batch sizes; CPU s per wall s 1.01 - 1.03" in printed
    assert main([str(RESULTS / "bench_h200_mahjong_base.jsonl")]) == 0
    assert "cuda:compile:bf16: ratio - over 0 batch sizes (3 without a baseline in their run)" in capsys.readouterr().out


def test_the_peers_and_trainspeed_rows_are_of_one_workload_definition_and_record_the_load():
    rows = read_rows(RESULTS / "reference_cpu_mahjong_tiny.jsonl")
    assert {row.target for row in rows} == {"cpu:eager:fp32", "reference-torch:cpu:eager:fp32",
                                            "reference-jax:cpu:jit:fp32"}
    assert len({row.workload_sha256 for row in rows}) == 1 and rows[0].workload_sha256 is not None
    assert {row.flops_per_sample for row in rows} == {22_635_776.0}
    assert all(row.machine.load_average_start is not None and row.machine.load_average_end is not None for row in rows)
