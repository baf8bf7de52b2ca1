"""`trainspeed study critical-batch` end to end on the session's tiny run (every checkpoint kept):
2 points x 2 factors x 2 seeds at the smallest branch budget, its rows, a rerun that trains
nothing, the report with its figure; a 2-rank base run; and bad input, one line before anything runs.
Only the first study runs in a child of its own; the rest, and the 2-rank base run, run in this
process (their branches and ranks are children all the same), which spares a command's start each."""

import json
import shutil
from pathlib import Path

import pytest

from child_commands import run_ok
from trainspeed.cli import build_parser, main
from trainspeed.studies.critical_batch.decision import tolerance_from_seeds
from trainspeed.train.checkpoint import checkpoint_dir, checkpoint_name, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.e2e

SMALLEST = ["--at", "0.5,1", "--factors", "1,2", "--seeds", "2", "--branch-samples", "64"]
"""One step of the largest branch batch (64), two of the base batch (32)."""


def rows_of(path: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, path.read_text().splitlines()) if row["kind"] == kind]


@pytest.fixture(scope="module")
def studied(tmp_path_factory, tiny_run: Path) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("critical_batch")
    result = run_ok("study", "critical-batch", "--preset", "smoke", "--from", str(tiny_run), *SMALLEST,
                    "--out", str(out), "--no-progress", timeout=900)
    return out, result.stdout


def test_every_point_s_branches_give_its_critical_batch_by_the_rule_its_row_states(studied, tiny_run: Path):
    out, printed = studied
    rows = out / "critical_batch.jsonl"
    (settings,) = rows_of(rows, "critical-batch-study-config")
    assert (settings["base_global_batch"], settings["base_steps"], settings["base_samples"]) == (32, 6, 192)
    assert (settings["metric"], settings["op"], settings["lr_rule"]) == ("loss", "<=", "sqrt")
    assert (settings["target"], settings["nproc"], settings["branch_runs"], settings["samples_spent"]) == \
        ("cpu:eager:fp32", 1, 8, 8 * 64)
    assert settings["branch_processes"] == 1  # the smoke preset trains one branch at a time: all 8 in one process
    assert settings["time_to_target_samples"] is None and settings["fraction_of_time_to_target"] is None
    assert settings["fraction_of_base_run"] == pytest.approx(8 * 64 / 192) and settings["b_simple_curve"]
    branches = rows_of(rows, "critical-batch-branch")
    assert sorted((b["step"], b["factor"], b["seed"]) for b in branches) == \
        [(step, factor, seed) for step in (3, 6) for factor in (1, 2) for seed in (0, 1)]
    assert all(b["samples"] == 64 and b["steps"] == 64 // b["global_batch"] for b in branches)
    points = rows_of(rows, "critical-batch")
    assert [(p["at"], p["step"], p["samples"], p["fraction"]) for p in points] == [("0.5", 3, 96, 0.5), ("1", 6, 192, 1.0)]
    for point in points:
        assert point["global_batches"] == [32, 64]
        assert point["lrs"][1] == pytest.approx(point["lrs"][0] * 2 ** 0.5, rel=1e-5)  # sqrt of the factor
        assert point["lrs"][0] == pytest.approx(point["lr_at_step"], rel=1e-5)
        assert point["tolerance"] == pytest.approx(tolerance_from_seeds(point["values"][0]).value)
        assert "factor-1 seeds" in point["tolerance_rule"]
        expected = 64 if point["matches"][1] else 32
        assert point["critical_batch"] == expected and point["critical_at_least"] == point["matches"][1]
        assert point["critical_text"] == ("at least 64" if point["matches"][1] else "32")
        assert point["b_simple"] is not None or "unresolved" in point["b_simple_note"]
        assert point["branch_runs"] == 4 and point["samples_spent"] == 256
    for branch in branches:
        summary = json.loads((Path(branch["run_dir"]) / "summary.json").read_text())
        assert summary["init_from"]["step"] == branch["step"] and summary["init_from"]["run_dir"] == str(tiny_run)
        assert summary["learning_rates"]["peak"]["policy"] == pytest.approx(branch["lr"])
    assert ("critical batch: 8 branches spent 512 samples, 266.7% of the base run's 192 (no time-to-target study "
            "given: --compare-study DIR)") in printed


def test_a_rerun_trains_nothing_again_and_the_report_draws_the_critical_batch(studied, tiny_run: Path, capsys):
    out, _ = studied
    assert main(["study", "critical-batch", "--preset", "smoke", "--from", str(tiny_run), *SMALLEST,
                 "--out", str(out), "--no-progress"]) == 0
    assert "trainspeed train" not in capsys.readouterr().out
    assert [row["branch_processes"] for row in rows_of(out / "critical_batch.jsonl", "critical-batch-study-config")] \
        == [1, 0]
    first, second = (rows_of(out / "critical_batch.jsonl", "critical-batch")[index::2] for index in (0, 1))
    assert [p["critical_batch"] for p in first] == [p["critical_batch"] for p in second]
    report = out / "report.html"
    assert main(["report", str(out), "--out", str(report)]) == 0
    page = report.read_text()
    for anchor in ("fig-critical-batch", "table-critical-batch-points", "table-critical-batch-branches",
                   "table-critical-batch-studies"):
        assert anchor in page
    studies = page[page.index("table-critical-batch-studies"):page.index("table-critical-batch-points")]
    assert "processes" in studies and "wall s" in studies  # what each study cost: its processes and its time
    assert main(["plot", str(out / "critical_batch.jsonl"), "--out", str(out / "figure")]) == 0
    assert (out / "figure.png").stat().st_size > 0 and (out / "figure.svg").stat().st_size > 0


def test_a_two_rank_base_run_branches_on_its_ranks_unless_the_study_gives_others(selfplay_data: Path, tmp_path: Path):
    base = tmp_path / "base"
    assert main(["train", "--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data), "--nproc", "2",
                 "--steps", "2", "--batch-size-per-device", "16", "--checkpoint-every", "1", "--keep-checkpoints", "0",
                 "--eval-batches", "1", "--threads", "1", "--num-workers", "0", "--no-progress", "--out", str(base)]) == 0
    argv = ["study", "critical-batch", "--from", str(base), "--at", "1", "--factors", "1,2", "--seeds", "1",
            "--tolerance", "0.05", "--branch-samples", "64", "--parallel-runs", "1"]
    args = build_parser().parse_args([*argv, "--out", str(tmp_path / "defaults")])
    defaults = args.face.runner().config_from_args(args, tmp_path / "defaults")  # its checkpoint checked, as a start
    assert (defaults.nproc, defaults.target, defaults.num_workers) == (2, "cpu:eager:fp32", 0)
    out = tmp_path / "study"  # one branch on one rank from the 2-rank checkpoint (the cheapest that trains one)
    assert main([*argv, "--factors", "1", "--branch-samples", "32", "--nproc", "1", "--metric", "val/accuracy>=",
                 "--out", str(out), "--no-progress"]) == 0
    (settings,) = rows_of(out / "critical_batch.jsonl", "critical-batch-study-config")
    assert (settings["base_nproc"], settings["base_global_batch"], settings["nproc"]) == (2, 32, 1)
    (branch,) = rows_of(out / "critical_batch.jsonl", "critical-batch-branch")
    assert (branch["global_batch"], branch["nproc"], branch["step"]) == (32, 1, 2)
    (point,) = rows_of(out / "critical_batch.jsonl", "critical-batch")
    assert point["step"] == 2 and point["tolerance_rule"] == "--tolerance 0.05, given"
    assert (point["metric"], point["op"], branch["metric"]) == ("accuracy", ">=", "accuracy")
    assert point["critical_text"] == "at least 32"


def test_bad_input_is_one_line_before_anything_runs(tiny_run: Path, tmp_path: Path, cli_error):
    out = tmp_path / "out"
    study = ["study", "critical-batch", "--out", str(out), "--from", str(tiny_run)]
    bare = tmp_path / "bare"  # a run whose checkpoints are gone
    bare.mkdir()
    for name in ("train_config.json", "summary.json", "metrics.jsonl"):
        (bare / name).write_bytes((tiny_run / name).read_bytes())
    planted = tmp_path / "planted"  # a run one of whose checkpoints another workload's run wrote
    shutil.copytree(tiny_run, planted, ignore=shutil.ignore_patterns("*.lock"))
    payload = load_checkpoint(checkpoint_dir(tiny_run) / checkpoint_name(3))
    payload["config"] = json.dumps({**json.loads(payload["config"]), "workload": "stylegan3"})
    save_checkpoint(planted, 3, payload, keep=0)
    no_data = tmp_path / "no-data"  # a folder, but nothing `--data` reads
    no_data.mkdir()
    cases = [
        (["study", "critical-batch", "--out", str(out)], "give --from RUN_DIR"),
        (["study", "critical-batch", "--out", str(out), "--from", str(tmp_path)],
         f"--from {tmp_path} is not a run directory of `trainspeed train`"),
        (["study", "critical-batch", "--out", str(out), "--from", str(bare)],
         f"{bare} holds no checkpoint at or before step 1 (its checkpoints: steps none); the base run keeps them with "
         "--checkpoint-every K --keep-checkpoints 0"),
        ([*study, "--at", "0.1"], "holds no checkpoint at or before step 0"),
        ([*study, "--at", "7steps"], "--at 7steps lies past the base run's last step 6"),
        ([*study, "--at", "1.5"], "'1.5' lies outside (0, 1]"),
        ([*study, "--at", "0.5,0.6"], "--at 0.5 and 0.6 both branch from the checkpoint of step 3"),
        ([*study, "--factors", "0,2"], "--factors '0,2': give positive numbers up to 1000"),
        ([*study, "--factors", "-1"], "give positive numbers up to 1000"),
        ([*study, "--factors", "1.01"], "1.01 x the base run's global batch 32 is 32.32, not a whole batch"),
        ([*study, "--factors", "1,2", "--branch-samples", "96"], "--branch-samples 96 must be a multiple of every "
         "branch batch (batch 64 at factor 2)"),
        ([*study, "--seeds", "1"], "--seeds 1 gives the factor-1 branches no spread"),
        ([*study, "--seeds", "2", "--factor-seeds", "3"], "--factor-seeds 3 exceeds --seeds 2: the factor-1 "
         "branches, the reference of every comparison, take at least as many seeds; give --factor-seeds 2 or fewer"),
        ([*study, "--factor-seeds", "0"], "--factor-seeds"),
        ([*study, "--workload", "stylegan3"], "is a run of workload 'mahjong', not --workload stylegan3"),
        ([*study, "--target", "gpu:eager:fp32"], "unknown device 'gpu'"),
        (["study", "critical-batch", "--out", str(out), "--from", str(planted), "--at", "0.5"],
         "was written by a run of workload 'stylegan3', and this run trains 'mahjong'"),
        ([*study, "--compare-study", str(tmp_path / "no-study")], "critical-batch study: --compare-study: "),
        ([*study, "--metric", "top1_accuracy>="], "has no validation metric 'top1_accuracy' to judge the branches by "
         "(its metrics: loss, accuracy, majority_baseline, samples); give --metric NAME<= or NAME>="),
        ([*study, "--metric", "accuracy"], "write NAME<= (lower is better) or NAME>="),
        ([*study, "--data", str(tmp_path / "gone")], f"the branches train on {tmp_path / 'gone'}, which is not here "
         f"({tmp_path / 'gone'}: no such file or folder)"),
        ([*study, "--data", str(no_data)], f"which is not here ({no_data}: an empty folder;"),
    ]
    for argv, message in cases:
        line = cli_error(*argv)
        assert message in line, line
        assert not out.exists() or not any(out.iterdir())


def test_data_without_a_validation_sample_is_one_line_before_any_branch_trains(tmp_path: Path, cli_error, capsys):
    """Each branch is judged by its validation at its end: a base run on token data whose val file is
    empty (it trained, unable to validate) gets no branch trained for nothing."""
    from in_place_data import write_tokens

    data = tmp_path / "text"
    data.mkdir()
    write_tokens(data / "train.bin", 2_000, vocabulary=256)
    (data / "val.bin").write_bytes(b"")
    toy = ["--workload", "toy_workload:token_windows", "--num-workers", "0", "--threads", "1"]
    assert main(["train", *toy, "--data", str(data), "--steps", "2", "--batch-size-per-device", "4",
                 "--checkpoint-every", "1", "--keep-checkpoints", "0", "--no-progress", "--out",
                 str(tmp_path / "base")]) == 0
    capsys.readouterr()
    out = tmp_path / "study"
    line = cli_error("study", "critical-batch", "--preset", "smoke", *toy, "--from", str(tmp_path / "base"),
                     "--at", "1", "--factors", "1,2", "--seeds", "2", "--branch-samples", "8", "--metric", "accuracy>=",
                     "--out", str(out))
    assert line == (f"trainspeed: error: critical-batch study: each branch is judged by its validation accuracy, and the "
                    f"validation split of --data {data} holds no sample (too little data for one after its split); "
                    "give more data, or a validation split of its own (an image folder's val/ tree, a val.bin, "
                    "val-*.tar shards, a dataset's validation split)")
    assert not out.exists() or not any(out.rglob("summary.json"))


def test_the_study_trains_a_point_s_next_factor_only_once_the_one_below_it_matched(tiny_run: Path, tmp_path: Path):
    """The climb on the study's own plan (the base run's points and branches), with the branches'
    metric given instead of trained: factor 1 and 2 of every point at once, factor 4 of a point
    once its factor 2 matched, and nothing more where it did not."""
    from trainspeed.studies.critical_batch.study import FactorLadder, resolve_plan

    argv = ["study", "critical-batch", "--from", str(tiny_run), "--at", "0.5,1", "--factors", "1,2,4", "--seeds", "2",
            "--branch-samples", "128", "--no-progress"]
    args = build_parser().parse_args([*argv, "--out", str(tmp_path / "ladder")])
    plan = resolve_plan(args.face.runner().config_from_args(args, tmp_path / "ladder"))
    halfway, end = plan.points
    value = {1.0: 1.0, 2.0: 1.0, 4.0: 1.0}

    def metric(branch) -> float:  # seed 1 a little worse: a tolerance of t x 0.07 x 1 = 0.9 at factor 1
        return value[branch.factor] + 0.1 * branch.seed if branch.point == halfway else \
            (5.0 if branch.factor == 2.0 else 1.0) + 0.1 * branch.seed

    ladder = FactorLadder(plan, metric)
    started = ladder.start()
    assert sorted((b.point.step, b.factor, b.seed) for b in started) == \
        [(step, factor, seed) for step in (3, 6) for factor in (1.0, 2.0) for seed in (0, 1)]
    released = [branch for done in started for branch in ladder.finished(done)]
    assert sorted((b.point.step, b.factor, b.seed) for b in released) == [(3, 4.0, 0), (3, 4.0, 1)]
    assert [branch for done in released for branch in ladder.finished(done)] == []


def test_fewer_seeds_at_the_other_factors_train_fewer_branches_and_widen_the_tolerance(tiny_run: Path,
                                                                                        tmp_path: Path):
    """--seeds 3 --factor-seeds 2: the reference trains 3 seeds, each other factor 2; the next
    factor is released once those 2 are done; the point is judged with sqrt(1/3 + 1/2)."""
    from trainspeed.studies.critical_batch.decision import Spread, judge
    from trainspeed.studies.critical_batch.study import FactorLadder, resolve_plan, units

    argv = ["study", "critical-batch", "--from", str(tiny_run), "--at", "1", "--factors", "1,2,4", "--seeds", "3",
            "--factor-seeds", "2", "--branch-samples", "128", "--no-progress"]
    args = build_parser().parse_args([*argv, "--out", str(tmp_path / "fewer")])
    config = args.face.runner().config_from_args(args, tmp_path / "fewer")
    plan = resolve_plan(config)
    assert units(config) == 3 + 2 + 2 == len(plan.branches)
    ladder = FactorLadder(plan, lambda branch: 1.0 + 0.1 * branch.seed)
    started = ladder.start()
    assert sorted((b.factor, b.seed) for b in started) == [(1.0, 0), (1.0, 1), (1.0, 2), (2.0, 0), (2.0, 1)]
    released = [branch for done in started for branch in ladder.finished(done)]
    assert sorted((b.factor, b.seed) for b in released) == [(4.0, 0), (4.0, 1)]
    judged = judge(32, {1.0: Spread((1.0, 1.1, 1.2)), 2.0: Spread((1.0, 1.1))}, "<=")
    assert judged.tolerance is not None
    assert judged.tolerance.value == pytest.approx(tolerance_from_seeds([1.0, 1.1, 1.2], 2).value)
    assert "sqrt(1/3 + 1/2)" in judged.tolerance.rule
    full = build_parser().parse_args(["study", "critical-batch", "--from", str(tiny_run), "--at", "1", "--factors",
                                      "1,2,4,8,16", "--seeds", "3", "--branch-samples", "512", "--out",
                                      str(tmp_path / "default")])
    assert full.face.runner().config_from_args(full, tmp_path / "default").factor_seeds == 2  # 3 / sqrt(4), rounded up
