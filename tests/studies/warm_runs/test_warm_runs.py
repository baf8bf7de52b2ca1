"""The critical-batch study's branches trained in a few warm processes: fewer process starts than
branches, every branch's metric and every point's decision as a process per branch gives them,
and a branch that fails stops the study in one line naming its command, no branch after it started."""

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from child_commands import run_ok
from process_starts import watching_starts
from trainspeed.cli import main
from trainspeed.studies.common import StudyFailed
from trainspeed.studies.critical_batch.decision import Spread, judge
from trainspeed.studies.warm_runs.runner import TrainJob, WarmRunner
from trainspeed.studies.warm_runs.worker import WORKER_MODULE
from trainspeed.train.config import TrainConfig

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # minutes in all: started first (tests/conftest.py)

def rows_of(path: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["kind"] == kind]


def test_a_point_s_branches_share_processes_and_judge_as_a_process_each_would(tiny_run: Path, tmp_path: Path):
    out = tmp_path / "study"
    with watching_starts() as started:
        # Two factor-1 seeds (their spread is the tolerance) and one at factor 2: 3 branches, each run once more alone.
        assert main(["study", "critical-batch", "--from", str(tiny_run), "--at", "1", "--factors", "1,2", "--seeds", "2",
                     "--factor-seeds", "1", "--branch-samples", "64", "--parallel-runs", "2", "--no-progress",
                     "--out", str(out)]) == 0
    (settings,) = rows_of(out / "critical_batch.jsonl", "critical-batch-study-config")
    branches = rows_of(out / "critical_batch.jsonl", "critical-batch-branch")
    assert settings["branch_runs"] == len(branches) == 3
    workers = [argv for argv in started if WORKER_MODULE in argv]
    assert len(workers) == settings["branch_processes"] == 2  # --parallel-runs of them, for 3 branches
    assert not [argv for argv in started if "train" in argv]  # no branch is a command of its own
    # Each branch again as its own `trainspeed train`, the command its row records, into a folder of its own.
    def alone(branch: dict) -> float:
        argv = shlex.split(branch["command"])[1:]
        own = tmp_path / "alone" / branch["run"]
        argv[argv.index("--out") + 1] = str(own)
        run_ok(*argv, timeout=300)
        return json.loads((own / "summary.json").read_text())["validation"][branch["metric"]]

    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(alone, branches))
    assert found == [branch["value"] for branch in branches]  # bit for bit
    values: dict[float, list[float]] = {}
    for branch, value in zip(branches, found):
        values.setdefault(branch["factor"], []).append(value)
    (point,) = rows_of(out / "critical_batch.jsonl", "critical-batch")
    alone = judge(point["base_global_batch"], {factor: Spread(tuple(seeds)) for factor, seeds in values.items()},
                  point["op"])
    assert alone.critical is not None and alone.tolerance is not None
    assert (alone.critical.batch, alone.critical.at_least, alone.tolerance.value) == \
        (point["critical_batch"], point["critical_at_least"], point["tolerance"])


def test_a_branch_that_fails_stops_the_study_in_one_line_and_starts_no_branch_after_it(tiny_run: Path,
                                                                                      tmp_path: Path):
    settings = TrainConfig.from_json((tiny_run / "train_config.json").read_text())

    def job(name: str, data: Path) -> TrainJob:
        config = TrainConfig(workload="mahjong", size="tiny", data=str(data), threads=1, num_workers=0,
                             batch_size_per_device=32, steps=1, eval_batches=1, noise_scale="off", progress=False,
                             resume=True, init_from=str(tiny_run), init_step=6, out_dir=str(tmp_path / name))
        return TrainJob(name, config)

    runner = WarmRunner(workers=1)
    with pytest.raises(StudyFailed) as failed:
        runner.run([job("gone", tmp_path / "gone"), job("after", Path(settings.data or ""))])
    message = str(failed.value)
    assert message.startswith("`trainspeed train --workload mahjong") and "failed (exit 2 after" in message
    assert f"--out {tmp_path / 'gone'}" in message and str(tmp_path / "gone") in message.split("):", 1)[1]
    assert "\n" not in message and "Traceback" not in message
    assert runner.processes == 1 and not (tmp_path / "after").exists()
