"""The bench checks a workload's declared FLOPs per sample against torch's FLOP formulas on one
training step, records both in every row, says which one MFU uses, and warns in one line when
they differ by more than 5%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_workload import FEATURES, exact_flops

from trainspeed.bench.flops import check_flops
from trainspeed.cli import main
from trainspeed.workloads import get_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BENCH = ["bench", "--targets", "cpu:eager:fp32", "--batch-sizes", "4,8", "--windows", "1", "--warmup-steps", "0",
         "--min-window-s", "0.01", "--no-progress", "--no-plot", "--peak-tflops", "1"]


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def _bench(capsys, tmp_path: Path, workload: str) -> tuple[list[dict], list[str]]:
    out = tmp_path / "rows.jsonl"
    code = main([*BENCH, "--workload", workload, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    return [json.loads(line) for line in out.read_text().splitlines()], err.strip().splitlines()


def test_a_count_8_percent_off_is_one_warning_and_both_counts_are_in_every_row(tmp_path, capsys):
    exact = exact_flops(FEATURES)
    rows, err = _bench(capsys, tmp_path, "toy_workload:overstated_flops")
    warnings = [line for line in err if line.startswith("trainspeed: warning: ")]
    assert len(warnings) == 1  # once per bench run, not once per row
    assert f"overstated tiny: flops_per_sample declares {1.08 * exact:.4g}" in warnings[0]
    assert "declared +8.0%" in warnings[0] and "MFU uses the declared count" in warnings[0]
    for row in rows:
        assert row["flops_per_sample_declared"] == row["flops_per_sample"] == pytest.approx(1.08 * exact)
        assert row["flops_per_sample_counted"] == exact
        assert row["mfu_flops_source"] == "declared"
        assert row["achieved_tflops"] == pytest.approx(row["samples_per_s"] * row["flops_per_sample"] / 1e12)


def test_an_attention_model_counted_under_the_math_backend_matches_its_formula(examples_on_path, tmp_path, capsys):
    """The CPU flash-attention kernel has no FLOP formula; counted with it, the charlm example's
    attention (14% of its FLOPs at the tiny size) would vanish and the check would warn."""
    rows, err = _bench(capsys, tmp_path, "char_lm_workload:CharLMWorkload")
    assert not [line for line in err if "warning" in line]
    assert {row["flops_per_sample_counted"] for row in rows} == {rows[0]["flops_per_sample_declared"]}


def test_a_step_that_reads_a_value_is_counted_on_the_host():
    check = check_flops(get_workload("toy_workload:loss_reading"), "tiny")
    assert (check.counted, check.counted_on, check.warning()) == (exact_flops(FEATURES), "cpu", None)


def test_a_step_with_a_gradient_penalty_is_counted():
    """StyleGAN3's R1 penalty differentiates a gradient (torch's FlopCounterMode refuses that); its
    second step, which has none, is within 5% of the declared average over the R1 interval."""
    check = check_flops(get_workload("stylegan3"), "tiny-t")
    assert check.counted_on == "meta" and abs(check.relative_difference) < 0.05 and check.warning() is None
