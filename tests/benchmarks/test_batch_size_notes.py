"""batch_size_notes.py prints the batch-size page's learning-rate and power bullets from the study's
rows: the edges of the LR sweep each batch chose, the plan as recorded and as `plan_power` computes
it today, and the comparisons' measured minimum detectable differences."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.batch_size_notes import main
from trainspeed.evaluate.power import plan_power

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_the_page_holds_what_the_script_prints_from_the_committed_rows(capsys):
    assert main([str(RESULTS / "batch_size_study.jsonl")]) == 0
    printed = capsys.readouterr().out
    flat = " ".join(printed.split())
    assert ("Every batch chose an edge of the sweep: 256 and 1024 its upper edge, so their best LR may lie above it; "
            "8192 its lower edge, so its best LR may lie below it.") in flat
    assert "the study printed that 5 seeds x 200 games per policy could detect 0.185 ranks" in flat
    assert "the plan could detect 0.400 ranks" in flat
    assert "were 0.18-0.30" in flat
    page = (RESULTS / "batch_size_study.md").read_text()
    for bullet in printed.strip().split("\n- "):
        assert bullet.removeprefix("- ") in page


def _study(tmp_path: Path, best: dict[int, float], power_deals_divisor: int = 1) -> Path:
    """A study's rows: settings with a recorded plan, one row per batch, two comparisons."""
    plan = plan_power(3, 25)
    recorded = {**plan.__dict__}
    if power_deals_divisor != 1:
        recorded["minimum_detectable_difference"] = plan.minimum_detectable_difference / power_deals_divisor
    settings = {"base_lr": 1e-3, "reference_batch": 64, "lr_factors": [1.0, 0.5, 2.0], "tuning_seed": 0,
                "seeds": [0, 1, 2]}
    rows = [{"kind": "batch-size-config", "study_id": "s", "settings": settings, "power": recorded}]
    rows += [{"kind": "batch-size-batch", "study_id": "s", "global_batch": batch, "best_lr_factor": factor,
              "peak_lr": 1e-3 * factor * (batch / 64) ** 0.5} for batch, factor in best.items()]
    rows += [{"kind": "batch-size-comparison", "study_id": "s", "minimum_detectable_difference": value}
             for value in (0.25, 0.3449)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_factor_inside_the_sweep_is_no_edge_and_a_plan_of_todays_formula_is_printed_as_is(tmp_path, capsys):
    assert main([str(_study(tmp_path, {64: 1.0, 256: 2.0}))]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "times 0.5, 1 or 2" in flat and "1 (batch 64, peak 1e-3) and 2 (batch 256, peak 4e-3)" in flat
    assert "1 of the 2 batches chose an edge of the sweep: 256 its upper edge, so its best LR may lie above it." in flat
    assert "Then seeds 1 and 2 at the best LR" in flat
    assert f"3 seeds x 100 games per policy could detect {plan_power(3, 25).minimum_detectable_difference:.3f} ranks" in flat
    assert "0.25-0.34" in flat and "printed that" not in flat


def test_a_plan_the_rows_recorded_apart_from_todays_is_shown_beside_it(tmp_path, capsys):
    assert main([str(_study(tmp_path, {64: 0.5, 256: 1.0}, power_deals_divisor=2))]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "1 of the 2 batches chose an edge of the sweep: 64 its lower edge, so its best LR may lie below it." in flat
    today = plan_power(3, 25).minimum_detectable_difference
    assert f"printed that 3 seeds x 100 games per policy could detect {today / 2:.3f} ranks" in flat
    assert f"the plan could detect {today:.3f} ranks" in flat and "2.0 times the printed difference" in flat
