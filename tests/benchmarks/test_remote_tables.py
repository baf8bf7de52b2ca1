"""remote_tables.py computes remote_cpu.md's numbers from the committed rows: remote over local
pairs rows of one run, negative wire times are left out and counted, the H200 projection is a
model whose sensitivity to each free parameter is printed beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.remote_tables import bytes_per_sample, main, modelled, sample_bytes, shard_sample_bytes
from trainspeed.bench.results import read_rows

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_model_is_compute_over_compute_plus_wire_and_pipelining_hides_a_wire_shorter_than_a_step():
    assert modelled(0.1, 1e6, 1e8, 0.0) == pytest.approx((0.1 / 0.18, 1.0))
    assert modelled(0.01, 1e6, 1e8, 0.001) == pytest.approx((0.01 / 0.091, 0.01 / 0.081))


def test_the_projection_sends_todays_sample_not_the_one_the_cpu_rows_sent():
    """86 planes x 34 tiles of float16 (as the shards hold them and the loader gives them), the
    82-byte mask and an int64 action; in float32 the features take twice the bytes; the shards hold
    the same features beside the mask, action and ids; the CPU rows were of the 74-plane input."""
    assert sample_bytes("mahjong", "base") == sample_bytes("mahjong", "tiny") == 86 * 34 * 2 + 82 + 8 == 5938
    assert sample_bytes("mahjong", "base", widen_floats=True) == 86 * 34 * 4 + 82 + 8 == 11786
    assert shard_sample_bytes("mahjong") == 86 * 34 * 2 + 82 + 1 + 4 + 1 + 2 == 5938
    sent = bytes_per_sample(read_rows(RESULTS / "remote_cpu_mahjong_tiny.jsonl"))  # the tensors and a little framing
    assert 74 * 34 * 4 + 82 + 8 == 10154 <= sent < 10155


def test_the_pages_tables_come_from_the_committed_rows(capsys):
    assert main([str(RESULTS / "remote_cpu_mahjong_tiny.jsonl"),
                 "--pipelined", str(RESULTS / "remote_pipelined_cpu_mahjong_tiny.jsonl"),
                 "--project", str(RESULTS / "bench_h200_mahjong_base.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "| netns-tbf-1gbit-client-rtt-0.2ms | 0.777 Gbit/s | 0.77 - 0.91 (8 batch sizes) |" in printed
    assert "(wire time negative)" in printed
    assert "- netns-tbf-1gbit-client-rtt-0.2ms, pipelined: 0.89 - 1.15" in printed
    assert "5,938 bytes per sample (today's mahjong base batch; these rows sent 10,154)" in printed
    assert "| 2048 | 43.1 | **0.31 (0.44)** | 0.82 (1.00) | 0.98 (1.00) |" in printed
    assert "| the model as above (5,938 bytes per sample) | 43.1 | 97.3 | 3.26x |" in printed
    assert "| 10 Gbit/s instead of 1 | 43.1 | 9.7 | 1.23x |" in printed
    assert "| 11,786 bytes per sample (the features in float32) | 43.1 | 193.1 | 5.48x |" in printed
    assert "| the link's measured rate (0.78 Gbit/s on this CPU) | 43.1 | 125.1 | 3.90x |" in printed
    assert "| cuda:eager:fp32's step time | 247.5 | 97.3 | 1.39x |" in printed
    assert "local / remote over these cases: 1.23x - 5.48x" in printed
