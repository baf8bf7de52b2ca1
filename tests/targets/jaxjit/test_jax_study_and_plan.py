"""The studies and the plan take a jax target as any other: `study time-to-target --target
jax:jit:fp32` trains its runs on JAX (each measuring its noise scale over micro-batches inside the
program), fits them, and `plan` ranks the jax configurations from the study and a jax bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.long,  # minutes in all: started first (tests/conftest.py)
    pytest.mark.e2e,
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

TARGET = "jax:jit:fp32"


def rows_of(path: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["kind"] == kind]


@pytest.mark.slow
def test_a_time_to_target_study_and_a_plan_on_a_jax_target(tmp_path: Path, selfplay_data: Path, capsys) -> None:
    study = tmp_path / "study"
    assert main(["study", "time-to-target", "--preset", "smoke", "--seeds", "1", "--data", str(selfplay_data),
                 "--until", "val/accuracy>=0.3", "--target", TARGET, "--out", str(study), "--no-progress"]) == 0
    records = rows_of(study / "time_to_target.jsonl", "time-to-target-study-run")
    assert {row["target"] for row in records} == {TARGET} and len(records) == 2
    assert all(row["reached"] for row in records), records
    assert {row["noise_scale_method"] for row in records} == {"micro-batches"}
    assert len(rows_of(study / "time_to_target.jsonl", "time-to-target-study-fit")) == 1
    for run in (path for path in (study / "time_to_target_runs").iterdir() if path.is_dir()):
        summary = json.loads((run / "summary.json").read_text())
        assert summary["target"] == TARGET
        readings = [row for row in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                    if row.get("kind") == "noise-scale"]
        assert readings and {row["method"] for row in readings} == {"micro-batches"}, run

    bench = tmp_path / "bench.jsonl"
    assert main(["bench", "--workload", "mahjong", "--size", "tiny", "--targets", TARGET, "--batch-sizes", "16,32",
                 "--threads", "1", "--windows", "2", "--min-window-s", "0.05", "--warmup-steps", "1",
                 "--peak-tflops", "1000", "--no-progress", "--no-plot", "--out", str(bench)]) == 0
    plan = tmp_path / "plan.jsonl"
    capsys.readouterr()
    assert main(["plan", str(bench), str(study), "--out", str(plan)]) == 0
    assert "recommended: jax:jit:fp32/1/" in capsys.readouterr().out
    predicted = [row for row in rows_of(plan, "plan") if row["status"] == "predicted"]
    assert {row["config"] for row in predicted} == {f"{TARGET}/1/16", f"{TARGET}/1/32"}
