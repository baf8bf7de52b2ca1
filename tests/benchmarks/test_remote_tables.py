"""remote_tables.py computes remote_cpu.md's numbers from the committed rows: remote over local
pairs rows of one run, negative wire times are left out and counted, the H200 projection is a
model whose sensitivity to each free parameter is printed beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.remote_tables import main, modelled

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_model_is_compute_over_compute_plus_wire_and_pipelining_hides_a_wire_shorter_than_a_step():
    assert modelled(0.1, 1e6, 1e8, 0.0) == pytest.approx((0.1 / 0.18, 1.0))
    assert modelled(0.01, 1e6, 1e8, 0.001) == pytest.approx((0.01 / 0.091, 0.01 / 0.081))


def test_the_pages_tables_come_from_the_committed_rows(capsys):
    assert main([str(RESULTS / "remote_cpu_mahjong_tiny.jsonl"),
                 "--pipelined", str(RESULTS / "remote_pipelined_cpu_mahjong_tiny.jsonl"),
                 "--project", str(RESULTS / "bench_h200_mahjong_base.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "| netns-tbf-1gbit-client-rtt-0.2ms | 0.777 Gbit/s | 0.77 - 0.91 (8 batch sizes) |" in printed
    assert "(wire time negative)" in printed
    assert "- netns-tbf-1gbit-client-rtt-0.2ms, pipelined: 0.89 - 1.15" in printed
    assert "| the model as above | 43.1 | 166.4 | 4.86x |" in printed
    assert "| 10 Gbit/s instead of 1 | 43.1 | 16.6 | 1.39x |" in printed
    assert "fp16 features, as the shards hold them) | 43.1 | 83.9 | 2.95x |" in printed
    assert "| cuda:eager:fp32's step time | 247.5 | 166.4 | 1.67x |" in printed
