"""`trainspeed study time-to-target` and `trainspeed plan` end to end, at the smoke preset on the
session's self-play data: the study's rows and fit, a rerun that reuses them, the plan on the
study's rows and a bench file, one configuration checked, and the report of it all."""

import json
from pathlib import Path

import pytest

from trainspeed.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # minutes in all: started first (tests/conftest.py)

EASY = "val/accuracy>=0.3"
"""Met at the first validation at either smoke batch."""


def rows_of(path: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["kind"] == kind]


@pytest.fixture(scope="module")
def studied(tmp_path_factory, selfplay_data: Path) -> Path:
    out = tmp_path_factory.mktemp("time_to_target")
    # In this process, as the rerun below: the study's own process is not what is tested; its trainings are children.
    assert main(["study", "time-to-target", "--preset", "smoke", "--data", str(selfplay_data), "--until", EASY,
                 "--out", str(out / "study"), "--no-progress"]) == 0
    assert main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", "cpu:eager:fp32", "--batch-sizes",
                 "8,16,32", "--threads", "1", "--windows", "2", "--min-window-s", "0.05", "--warmup-steps", "1",
                 "--peak-tflops", "1000", "--no-progress", "--no-plot", "--out", str(out / "bench.jsonl")]) == 0
    return out


def test_the_study_measures_steps_at_every_batch_and_fits_them(studied: Path):
    rows = studied / "study" / "time_to_target.jsonl"
    runs = rows_of(rows, "time-to-target-study-run")
    assert {(run["global_batch"], run["seed"]) for run in runs} == {(16, 0), (16, 1), (32, 0), (32, 1)}
    assert all(run["reached"] and run["steps"] * run["global_batch"] == pytest.approx(run["samples"]) for run in runs)
    assert all(run["command_s"] > run["wall_s"] > 0 and run["b_simple"] is not None for run in runs)
    batches = rows_of(rows, "time-to-target-study-batch")
    assert [batch["outcome"] for batch in batches] == ["reached by all 2 seeds"] * 2
    (fit,) = rows_of(rows, "time-to-target-study-fit")
    assert fit["batches"] == [16, 32] and fit["e_min"] > 0 and len(fit["draws"]) > 0
    for run in runs:
        summary = json.loads((Path(run["run_dir"]) / "summary.json").read_text())
        assert summary["time_to_target"]["until"] == EASY and summary["time_to_target"]["reached"]


def test_a_rerun_with_the_same_settings_trains_nothing_again(studied: Path, selfplay_data: Path, tmp_path: Path,
                                                            capsys):
    capsys.readouterr()
    assert main(["study", "time-to-target", "--preset", "smoke", "--data", str(selfplay_data), "--until", EASY,
                 "--out", str(tmp_path), "--runs-dir", str(studied / "study" / "time_to_target_runs"),
                 "--no-progress"]) == 0
    assert "trainspeed train" not in capsys.readouterr().out
    assert len(rows_of(tmp_path / "time_to_target.jsonl", "time-to-target-study-run")) == 4


def test_a_plan_of_study_rows_without_a_fit_says_what_it_needs(studied: Path, tmp_path: Path, capsys):
    rows = tmp_path / "time_to_target.jsonl"
    lines = (studied / "study" / "time_to_target.jsonl").read_text().splitlines()
    rows.write_text("".join(line + "\n" for line in lines if json.loads(line)["kind"] != "time-to-target-study-fit"))
    assert main(["plan", str(studied / "bench.jsonl"), str(rows)]) == 2
    assert "no study fit" in capsys.readouterr().err


def test_the_plan_ranks_the_configurations_and_checks_the_best(studied: Path, capsys):
    plan = studied / "plan.jsonl"
    capsys.readouterr()
    assert main(["plan", str(studied / "bench.jsonl"), str(studied / "study"), "--devices", "1,2", "--out", str(plan),
                 "--check", "best", "--check-dir", str(studied / "checks")]) == 0
    printed = capsys.readouterr().out
    assert "recommended:" in printed and "check " in printed
    rows = rows_of(plan, "plan")
    predicted = [row for row in rows if row["status"] == "predicted"]
    assert [row["rank"] for row in predicted] == list(range(1, len(predicted) + 1))
    assert sum(row["recommended"] for row in rows) == 1
    assert {row["config"] for row in rows if row["status"] == "not measured"} == set()  # 8, 16, 32 per device cover all
    (check,) = rows_of(plan, "plan-check")
    assert check["recommended"] and check["reached"] and check["measured_s"] > 0
    assert check["ratio"] == pytest.approx(check["measured_s"] / check["predicted_s"])
    assert main(["plan", str(studied / "bench.jsonl"), str(studied / "study"), "--out", str(plan),
                 "--check", "best", "--check-dir", str(studied / "checks")]) == 2
    assert "is not an empty folder; name a new --check-dir" in capsys.readouterr().err
    report = studied / "report.html"
    assert main(["report", str(studied / "study"), str(plan), "--out", str(report)]) == 0
    page = report.read_text()
    for anchor in ("fig-steps-to-target", "table-time-to-target-fit", "table-plan", "fig-plan-check"):
        assert anchor in page


def test_inputs_of_two_workloads_are_one_line(studied: Path, tmp_path: Path, capsys):
    other = tmp_path / "bench.jsonl"
    rows = [json.loads(line) for line in (studied / "bench.jsonl").read_text().splitlines()]
    other.write_text("".join(json.dumps({**row, "size": "base"}) + "\n" for row in rows))
    capsys.readouterr()
    assert main(["plan", str(other), str(studied / "study")]) == 2
    failed = capsys.readouterr().err
    assert len(failed.strip().splitlines()) == 1
    assert "size base" in failed and "give rows of one workload and size" in failed
    assert main(["plan", str(other), str(studied / "study"), "--borrow-steps"]) == 0
    borrowed = capsys.readouterr().out
    assert "steps of size tiny assumed for size base (--borrow-steps)" in borrowed
    assert "recommended: cpu:eager:fp32/1/" in borrowed
