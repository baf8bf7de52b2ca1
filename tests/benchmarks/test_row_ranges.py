"""row_ranges.py prints the ranges the pages quote from the rows, each ratio within its own run."""

from pathlib import Path

from benchmarks.row_ranges import main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_ranges_of_the_cpu_sweep_and_the_peers_come_from_their_rows(capsys):
    assert main([str(RESULTS / "bench_cpu_mahjong_tiny.jsonl"), str(RESULTS / "reference_cpu_mahjong_tiny.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "cpu:eager:bf16: ratio 0.73 - 1.08 over 7 batch sizes" in printed
    assert "xla:lazy:fp32: ratio 0.80 - 1.76 over 7 batch sizes; CPU s per wall s 1.34 - 1.74" in printed
    assert "reference-torch:cpu:eager:fp32: ratio 0.83 - 1.54 over 5 batch sizes" in printed
    assert main([str(RESULTS / "bench_h200_mahjong_base.jsonl")]) == 0
    assert "cuda:compile:bf16: ratio - over 0 batch sizes (3 without a baseline in their run)" in capsys.readouterr().out
