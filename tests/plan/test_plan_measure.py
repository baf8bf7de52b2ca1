"""`plan --measure --budget-s S`: the bench rows and short runs a plan lacks, each estimated, taken in
order within the budget and run by trainspeed's own commands; a budget too small for even one is
one line before anything runs. And a critical-batch study in place of a time-to-target study."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.plan.inputs import read_plan_inputs
from trainspeed.plan.measure import lacking, within_budget
from trainspeed.plan.plan import default_grid
from trainspeed.plan.steps import steps_model
from trainspeed.train.config import LaunchConfig, TrainConfig
from trainspeed.train.flags import config_of_command

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
BASE = RESULTS / "plan_mahjong" / "checks" / "cpu-eager-fp32-2-128"
"""A committed 2-device run at global batch 128 that met val/accuracy>=0.85 and measured its noise scale."""


def base_run(tmp_path: Path, with_settings: bool = True, **length: int) -> Path:
    """The committed run, with the settings it ran with (its train_config.json) where asked: 400
    steps, or the `length` given (`samples=N`)."""
    run = tmp_path / "base"
    shutil.copytree(BASE, run)
    if with_settings:
        config = TrainConfig(workload="mahjong", size="tiny", data=str(tmp_path), batch_size_per_device=64,
                             **(length or {"steps": 400}), until="val/accuracy>=0.85", launch=LaunchConfig(nproc=2),
                             out_dir=str(run))
        (run / "train_config.json").write_text(config.to_json())
    return run


def wanted(tmp_path: Path, run: Path):
    inputs = read_plan_inputs([run])
    model = steps_model(inputs)
    grid = default_grid(inputs, None, (1, 2), None, None, model, measuring=True)
    return inputs, lacking(inputs, grid, model, 1, tmp_path / "measured")


def test_the_plan_lacks_every_bench_row_its_configurations_run_and_a_run_of_each_device_count_not_given(tmp_path):
    """Global batches from a quarter to 4x the run's 128, on 1 and 2 devices: the base run's own
    per-device batch is benched first; no 1-device run was given, so a short one of the base
    run's settings at its global batch is wanted, made by train's own command."""
    _, (wants, runs, no_runs) = wanted(tmp_path, base_run(tmp_path))
    (bench,) = wants
    assert bench.target == "cpu:eager:fp32" and bench.batches[0] == 64 and bench.workload == "mahjong"
    assert set(bench.batches) >= {16, 32, 64, 128, 256, 512}
    (run,) = runs
    assert no_runs is None and run.command[0] == "train"
    config = config_of_command(list(run.command))
    assert (config.launch.nproc, config.batch_size_per_device, config.target) == (1, 128, "cpu:eager:fp32")
    assert (config.workload, config.size, config.until, config.resume) == ("mahjong", "tiny", None, False)
    assert 20 <= (config.steps or 0) <= 120 and Path(config.out_dir).parent == tmp_path / "measured" / "runs"
    # two validations with a window after each (their pauses are measured), then the one at the end
    assert 2 * config.eval_every < config.steps and config.log_every <= config.eval_every


def test_the_bench_rows_are_measured_at_the_threads_the_runs_train_at(tmp_path):
    """The bench times the steps and compilations the plan's runs will make: at their threads (the
    base run's settings, else the study's recipe), not at torch's default. More threads than this
    machine has are the short run's to refuse in one line (the test below)."""
    from trainspeed.flags import machine_cpus
    from trainspeed.plan.measure import bench_threads

    run = base_run(tmp_path)
    config = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**config, "threads": machine_cpus()}))
    inputs, (wants, runs, _) = wanted(tmp_path, run)
    model = steps_model(inputs)
    assert bench_threads(inputs, model) == machine_cpus()
    chosen, _ = within_budget(inputs, wants, runs, 1e9, tmp_path / "measured", bench_threads(inputs, model))
    (bench,) = [item for item in chosen if item.command[0] == "bench"]
    assert bench.command[bench.command.index("--threads") + 1] == str(machine_cpus())
    study = read_plan_inputs([RESULTS / "named_time_to_target_gpt2.jsonl"])
    assert bench_threads(study, steps_model(study)) == study.settings.settings.threads == 1


def test_a_short_run_of_a_base_run_that_trained_to_a_number_of_samples_is_as_long_as_its_steps(tmp_path):
    """The base run's length was `--samples`: the short run's steps replace it (train takes one length)."""
    _, (_, runs, _) = wanted(tmp_path, base_run(tmp_path, samples=393216))
    (run,) = runs
    config = config_of_command(list(run.command))
    assert config.samples is None and 20 <= (config.steps or 0) <= 120


def test_the_budget_takes_the_measurements_in_order_and_leaves_out_what_does_not_fit(tmp_path):
    inputs, (wants, runs, _) = wanted(tmp_path, base_run(tmp_path))
    (bench,) = wants
    first = bench.start_s + bench.batch_s[0]
    chosen, left_out = within_budget(inputs, wants, runs, first + 1e-6, tmp_path / "measured", None)
    (measurement,) = chosen
    assert measurement.command[0] == "bench" and "--batch-sizes" in measurement.command
    assert measurement.command[measurement.command.index("--batch-sizes") + 1] == "64"
    assert measurement.estimate_s == pytest.approx(first)
    assert len(left_out) == len(bench.batches) - 1 + len(runs) and runs[0].line() in left_out
    everything = bench.start_s + sum(bench.batch_s) + runs[0].estimate_s
    chosen, left_out = within_budget(inputs, wants, runs, everything + 1e-6, tmp_path / "measured", None)
    assert [item.command[0] for item in chosen] == ["bench", "train"] and not left_out
    smallest = min(bench.start_s + min(bench.batch_s), runs[0].estimate_s)
    with pytest.raises(UsageError, match="is less than the smallest measurement"):
        within_budget(inputs, wants, runs, smallest * 0.99, tmp_path / "measured", None)


@pytest.mark.parametrize("kind", ["token-file", "image-folder", "empty-folder"])
def test_the_runs_train_on_the_base_run_s_data_of_any_format_and_data_that_is_none_says_why(tmp_path, kind):
    from in_place_data import write_image_folder, write_tokens

    run = base_run(tmp_path)
    data = {"token-file": lambda: write_tokens(tmp_path / "text.bin", 500),
            "image-folder": lambda: write_image_folder(tmp_path / "photos", per_class=1),
            "empty-folder": lambda: (tmp_path / "empty").mkdir() or tmp_path / "empty"}[kind]()
    config = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**config, "data": str(data)}))
    _, (wants, runs, no_runs) = wanted(tmp_path, run)
    assert wants
    if kind == "empty-folder":
        assert not runs and f"which is not here ({data}: an empty folder;" in (no_runs or "")
    else:
        assert no_runs is None and runs and config_of_command(list(runs[0].command)).data == str(data)


def test_a_run_without_its_settings_gets_bench_rows_only_and_says_why(tmp_path):
    _, (wants, runs, no_runs) = wanted(tmp_path, base_run(tmp_path, with_settings=False))
    assert wants and not runs and "holds no train_config.json" in (no_runs or "")


def test_a_budget_too_small_for_even_one_measurement_is_one_line_before_anything_runs(cli_error, tmp_path):
    run = base_run(tmp_path)
    out, measured = tmp_path / "plan.jsonl", tmp_path / "measured"
    error = cli_error("plan", str(run), "--measure", "--budget-s", "0.5", "--measure-dir", str(measured),
                      "--out", str(out))
    assert "plan: --budget-s 0.5 is less than the smallest measurement (~" in error and "give a larger budget" in error
    assert not out.exists() and not measured.exists()


@pytest.mark.parametrize("argv, said", [
    (["--measure", "--budget-s", "10"], "--measure needs --budget-s (the seconds it may spend) and --measure-dir"),
    (["--budget-s", "10"], "--budget-s and --measure-dir are --measure's; give --measure too"),
    (["--measure", "--budget-s", "0", "--measure-dir", "m"], "argument --budget-s"),
])
def test_measure_flags_that_do_not_go_together_are_one_line(cli_error, tmp_path, argv, said):
    assert said in cli_error("plan", str(base_run(tmp_path)), *argv)


def test_a_measure_dir_that_holds_files_is_refused_before_anything_runs(cli_error, tmp_path):
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "notes.txt").write_text("mine")
    error = cli_error("plan", str(base_run(tmp_path)), "--measure", "--budget-s", "100", "--measure-dir", str(measured))
    assert "is not an empty folder" in error and [path.name for path in measured.iterdir()] == ["notes.txt"]


def test_a_users_module_that_only_the_inputs_name_is_never_run(cli_error, tmp_path):
    run = base_run(tmp_path)
    config = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**config, "workload": "someones_module:factory"}))
    error = cli_error("plan", str(run), "--measure", "--budget-s", "100", "--measure-dir", str(tmp_path / "m"))
    assert "--measure would import someones_module:factory, a module the inputs name" in error


@pytest.mark.e2e
def test_one_command_measures_what_the_plan_lacks_plans_with_it_and_checks_it_at_two_seeds(tmp_path, monkeypatch,
                                                                                           capsys):
    """A run of the toy to its goal; `plan --measure` benches its batch (the one measurement the plan
    lacks here) by `trainspeed bench` in a child process, predicts from the row it wrote, and
    `--check` trains the base run's own settings (no study) to the goal on each check seed
    (`--check-seeds 2`): a row per run, each in its own folder, and a line of their mean."""
    from child_commands import TESTS
    from toy_workload import write_toy_data
    from trainspeed.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    write_toy_data(tmp_path / "data", 1024)
    assert main(["train", "--workload", "toy_workload:validated", "--data", "data", "--steps", "30",
                 "--batch-size-per-device", "16", "--lr", "0.5", "--lr-scaling", "none", "--until",
                 "val/accuracy>=0.9", "--eval-every", "10", "--log-every", "5", "--no-progress", "--out", "base"]) == 0
    capsys.readouterr()
    # The budget is far above the estimate on any machine, however loaded: the estimate is from the
    # base run's own start-up and step times, which the machine's load stretches.
    assert main(["plan", "base", "--measure", "--budget-s", "86400", "--measure-dir", "measured", "--workload",
                 "toy_workload:validated", "--devices", "1", "--global-batches", "16", "--schedules", "fixed",
                 "--out", "plan.jsonl", "--check", "best", "--check-dir", "checks", "--check-seeds", "2",
                 "--check-rebench"]) == 0
    printed = capsys.readouterr().out
    assert "measure: 1 measurement(s)" in printed and "trainspeed bench --workload toy_workload:validated" in printed
    (bench,) = [json.loads(line) for line in (tmp_path / "measured" / "bench.jsonl").read_text().splitlines()]
    assert (bench["batch_size"], bench["status"], bench["workload"]) == (16, "ok", "validated")
    row, *checks = [json.loads(line) for line in (tmp_path / "plan.jsonl").read_text().splitlines()]
    assert (row["config"], row["status"]) == ("cpu:eager:fp32/1/16", "predicted")
    assert any("measured/bench.jsonl" in source for source in row["sources"])
    for check, seed in zip(checks, (1000, 1001), strict=True):
        assert (check["kind"], check["config"], check["reached"], check["seed"]) == ("plan-check", row["config"], True,
                                                                                       seed)
        assert check["run_dir"] == str(Path("checks") / "cpu-eager-fp32-1-16" / f"seed-{seed}")
        assert (tmp_path / check["run_dir"] / "summary.json").is_file() and f"--seed {seed}" in check["command"]
        assert "--until 'val/accuracy>=0.9' --stop-at-target" in check["command"] and "--lr 0.5" in check["command"]
    # --check-rebench: the row the step time came from, benched again with its own settings before the
    # first run, and both runs held against the prediction at that speed
    (again,) = [json.loads(line) for line in (tmp_path / "checks" / "rebench-cpu-eager-fp32-1-16.jsonl")
                .read_text().splitlines()]
    assert (again["batch_size"], again["target"], again["warmup_steps"]) == (16, bench["target"], bench["warmup_steps"])
    assert again["windows"] >= bench["windows"] and again["min_window_s"] >= bench["min_window_s"]
    assert again["machine"]["torch_threads"] == bench["machine"]["torch_threads"]
    step_ratio = bench["samples_per_s"] / again["samples_per_s"]
    now_s = row["overhead_s"] + (row["predicted_s"] - row["overhead_s"]) * step_ratio  # eager: nothing compiles
    for check in checks:
        assert (check["bench_samples_per_s"], check["rebench_samples_per_s"]) == (bench["samples_per_s"],
                                                                                  again["samples_per_s"])
        assert check["predicted_s_now"] == pytest.approx(now_s) and check["rebench_compile_s"] is None
        assert check["ratio_now"] == pytest.approx(check["measured_s"] / now_s)
        assert check["within_now"] == (abs(check["ratio_now"] - 1) <= 0.25)
        low, high = check["predicted_s_now_ci95"]
        assert low < now_s < high and check["inside_now"] == (low <= check["measured_s"] <= high)
        assert check["rebench_source"] == str(Path("checks") / "rebench-cpu-eager-fp32-1-16.jsonl") + ":1"
    assert f"at the speed now predicted {now_s:,.1f} s" in printed
    assert printed.count("at the speed now (the bench row again") == 3  # each run's line, and their mean's
    mean_s = (checks[0]["measured_s"] + checks[1]["measured_s"]) / 2
    assert (f"check cpu:eager:fp32/1/16, mean of 2 seeds (1000, 1001): measured {mean_s:,.1f} s "
            f"({checks[0]['measured_s']:,.1f}, {checks[1]['measured_s']:,.1f}), predicted "
            f"{row['predicted_s']:,.1f} s (ratio {mean_s / row['predicted_s']:.2f}, ") in printed


# --- a critical-batch study in place of a time-to-target study -------------------------------------

def critical_study(tmp_path: Path, run: Path, points: list[tuple[int, float | None, bool]], size: str = "tiny") -> Path:
    """A critical-batch study's folder: its settings row naming the base run, a branch row, and a
    point row per (samples, critical batch, at least); the fields a point row carries beyond these
    are the plan's to pass over."""
    study = tmp_path / "critical"
    study.mkdir()
    rows = [{"kind": "critical-batch-study-config", "schema_version": 1, "study_id": "cb-1", "base_run": str(run),
             "workload": "mahjong", "size": size},
            {"kind": "critical-batch-branch", "schema_version": 1, "study_id": "cb-1", "factor": 2}]
    rows += [{"kind": "critical-batch", "schema_version": 1, "study_id": "cb-1", "samples": samples,
              "critical_batch": critical, "critical_at_least": at_least, "tolerance": 0.01}
             for samples, critical, at_least in points]
    (study / "critical_batch.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return study


def test_a_critical_batch_study_gives_the_steps_and_its_base_run(tmp_path):
    """The study's folder alone: its base run is read from its settings row, and the critical batch
    at the point nearest before the goal (40,960 samples; it crossed between 40,960 and 45,056) takes the
    place of the noise scale in McCandlish's model; a point no branch measured is passed over."""
    from trainspeed.plan.steps import base_run_model

    run = base_run(tmp_path, with_settings=False)
    study = critical_study(tmp_path, run, [(10240, 64.0, False), (30000, None, False), (40960, 512.0, False)])
    inputs = read_plan_inputs([study])
    assert [str(Path(str(found.source)).parent) for found in inputs.runs] == [str(run)]
    assert [(point.samples, point.critical_batch) for point in inputs.critical_points] == [(10240, 64), (40960, 512)]
    model = steps_model(inputs)
    assert "the critical batch 512 near the goal" in model.source and "critical_batch.jsonl:5" in model.source
    steps = inputs.runs[0].row.time_to_target.crossing_samples(0.85) / 128  # type: ignore[union-attr]
    assert model.fit.s_min == pytest.approx(steps / (1 + 512 / 128)) and model.fit.b_crit == pytest.approx(512)
    assert model.profile is not None and "critical-batch points" in model.profile.source
    without = base_run_model(inputs.runs[0], 0.85, ())
    assert not isinstance(without, str) and without.fit.b_crit != pytest.approx(512)


def test_a_critical_batch_every_batch_tried_matched_is_a_lower_bound_as_an_unresolved_noise_scale(tmp_path):
    """At least 512 near the goal: the steps are predicted at 512, and their interval runs to
    perfect scaling through the run, as an unresolved noise scale's with that bound."""
    run = base_run(tmp_path, with_settings=False)
    model = steps_model(read_plan_inputs([critical_study(tmp_path, run, [(40960, 512.0, True)])]))
    steps = model.fit.steps(128)
    assert model.fit.b_crit == pytest.approx(512) and model.bound is not None
    assert model.interval(512) == pytest.approx(sorted([model.fit.steps(512), steps * 128 / 512]))
    assert "at least 512" in (model.note or "") and "the largest batch tried still matched" in (model.note or "")


@pytest.mark.parametrize("points, size, said", [
    ([(10240, None, False)], "tiny", "holds no 'critical-batch' rows with a critical batch (samples, critical_batch)"),
    ([(10240, -4.0, False)], "tiny", "a critical-batch row whose critical_batch is -4.0, not a number above 0"),
    ([(10240, 64.0, False)], "base", "is of workload mahjong size base"),
])
def test_a_critical_batch_study_that_gives_no_points_of_this_workload_is_one_line(cli_error, tmp_path, points, size,
                                                                                  said):
    run = base_run(tmp_path, with_settings=False)
    study = critical_study(tmp_path, run, points, size)
    assert said in cli_error("plan", str(study), str(RESULTS / "plan_bench_mahjong.jsonl"))


def test_a_base_run_setting_this_machine_refuses_is_one_line_before_anything_runs(cli_error, tmp_path):
    """A base run of 4,096 threads elsewhere: its short run's `trainspeed train` refuses them here."""
    run = base_run(tmp_path)
    config = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**config, "threads": 4096}))
    measured = tmp_path / "measured"
    error = cli_error("plan", str(run), "--measure", "--budget-s", "100000", "--measure-dir", str(measured))
    assert "plan: --measure: a short run of cpu:eager:fp32 on 1 device(s)" in error
    assert "would refuse the settings it is made of: " in error and "--threads" in error and not measured.exists()
