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
    """86 planes x 34 tiles of float32, the 82-byte mask and an int64 action; the shards hold the
    features in float16 beside the mask, action and ids; the CPU rows were of the 74-plane input."""
    assert sample_bytes("mahjong", "base") == sample_bytes("mahjong", "tiny") == 86 * 34 * 4 + 82 + 8 == 11786
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
    assert "11,786 bytes per sample (today's mahjong base batch; these rows sent 10,154)" in printed
    assert "| 2048 | 43.1 | **0.18 (0.22)** | 0.69 (1.00) | 0.96 (1.00) |" in printed
    assert "| the model as above (11,786 bytes per sample) | 43.1 | 193.1 | 5.48x |" in printed
    assert "| 10 Gbit/s instead of 1 | 43.1 | 19.3 | 1.45x |" in printed
    assert "| 5,938 bytes per sample (fp16 features, as the shards hold them) | 43.1 | 97.3 | 3.26x |" in printed
    assert "| the link's measured rate (0.78 Gbit/s on this CPU) | 43.1 | 248.4 | 6.77x |" in printed
    assert "| cuda:eager:fp32's step time | 247.5 | 193.1 | 1.78x |" in printed
    assert "local / remote over these cases: 1.45x - 6.77x" in printed
