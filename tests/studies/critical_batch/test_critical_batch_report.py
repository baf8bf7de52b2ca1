"""The critical-batch study's part of `trainspeed report`: a study's row is shown from what it
holds, each of its optional fields on its own (a row written or edited elsewhere may hold one
without another)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from trainspeed.kinds import read_inputs, render
from trainspeed.studies.critical_batch.rows import CriticalBatchSettingsRow

COMMITTED = Path(__file__).resolve().parents[3] / "docs" / "results" / "critical_batch_mahjong.jsonl"


def _settings_row() -> dict:
    """The committed Mahjong study's settings row (it compared its samples with a time-to-target study's)."""
    first = json.loads(COMMITTED.read_text().splitlines()[0])
    assert first["kind"] == CriticalBatchSettingsRow.KIND
    return first


@pytest.mark.parametrize(("edit", "said"), [
    ({}, "15.1% of the time-to-target study's 1,626,112 (time_to_target_study_mahjong.jsonl); "
         "500.0% of the base run's 49,152"),
    ({"time_to_target_samples": None}, "15.1% of the time-to-target study's samples "
                                       "(time_to_target_study_mahjong.jsonl); 500.0% of the base run's 49,152"),
    ({"time_to_target_samples": None, "time_to_target_rows": None},
     "15.1% of the time-to-target study's samples; 500.0% of the base run's 49,152"),
    ({"fraction_of_time_to_target": None}, "500.0% of the base run's 49,152; no time-to-target study given"),
], ids=["as-written", "no-samples", "no-samples-nor-rows-file", "no-study"])
def test_a_study_s_settings_row_is_shown_from_the_fields_it_holds(tmp_path: Path, edit: dict, said: str) -> None:
    rows = tmp_path / "critical_batch.jsonl"
    rows.write_text(json.dumps({**_settings_row(), **edit}) + "\n")
    page = html.unescape(render(read_inputs([rows])))
    assert "Each study: its base run, its branches, and the samples they spent" in page
    assert said in page
