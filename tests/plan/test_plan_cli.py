"""`trainspeed plan` and `trainspeed study time-to-target` refuse bad input in one line, before anything runs:
among it a file to write that is no file of their own rows, or no regular file at all."""

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from child_commands import EXAMPLES

from trainspeed.errors import UsageError


def test_a_check_needs_somewhere_to_write(cli_error, tmp_path: Path):
    rows = tmp_path / "bench.jsonl"
    rows.write_text("")
    assert "--check needs --out" in cli_error("plan", str(rows), "--check", "best")


def test_a_missing_input_is_named(cli_error, tmp_path: Path):
    assert "no such file or directory" in cli_error("plan", str(tmp_path / "missing.jsonl"))


def test_the_plan_does_not_append_to_its_own_input(cli_error, tmp_path: Path):
    rows = tmp_path / "bench.jsonl"
    rows.write_text("")
    assert "is one of the inputs" in cli_error("plan", str(rows), "--out", str(rows))


def test_the_study_needs_data_and_a_goal(cli_error, tmp_path: Path):
    assert "give --data" in cli_error("study", "time-to-target", "--out", str(tmp_path / "out"))


def test_the_study_refuses_a_goal_the_workload_does_not_measure(cli_error, tmp_path: Path):
    error = cli_error("study", "time-to-target", "--out", str(tmp_path / "out"), "--data", str(tmp_path),
                      "--until", "val/bleu>=30")
    assert "has no validation metric 'bleu'" in error


def test_the_study_refuses_validation_samples_that_differ_between_batches(cli_error, tmp_path: Path):
    error = cli_error("study", "time-to-target", "--out", str(tmp_path / "out"), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5", "--global-batches", "64,96", "--val-samples", "128")
    assert "--val-samples 128 must be a multiple of batch 96" in error


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
PLAN_INPUTS = (str(RESULTS / "plan_bench_mahjong.jsonl"), str(RESULTS / "time_to_target_study_mahjong.jsonl"))
"""Committed bench rows and a committed study's fit: enough for a plan that runs in a second."""


def refused_before_planning(capsys, *argv: str) -> str:
    """`trainspeed ARGV...` in-process: exit 2 with one error line, and no plan printed (nothing ran)."""
    from trainspeed.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: "), (code, lines)
    assert captured.out == "", captured.out
    return lines[0]


def test_the_plan_runs_on_the_committed_inputs(capsys, tmp_path: Path):
    """The inputs of the refusals below plan as they are: a refusal is the --out's doing."""
    from trainspeed.cli import main

    out = tmp_path / "plan.jsonl"
    assert main(["plan", *PLAN_INPUTS, "--out", str(out)]) == 0
    assert main(["plan", *PLAN_INPUTS, "--out", str(out)]) == 0  # a file of plan rows takes more of them
    assert "recommended:" in capsys.readouterr().out
    assert {json.loads(line)["kind"] for line in out.read_text().splitlines()} == {"plan"}


@pytest.mark.parametrize("rows, kind", [
    (RESULTS / "charlm_cpu" / "metrics.jsonl", "train"),
    (RESULTS / "plan_bench_charlm.jsonl", "bench"),
], ids=["a-run's-metrics", "another-command's-bench-file"])
def test_the_plan_appends_only_to_a_file_of_plan_rows(capsys, tmp_path: Path, rows: Path, kind: str):
    """A run's metrics.jsonl or a bench file given a plan's rows would be refused by its own readers
    (`report RUN`, `plan RUN`, `bench --out`) ever after: the plan refuses it instead, untouched."""
    out = tmp_path / rows.name
    shutil.copyfile(rows, out)
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", str(out))
    assert f"--out {out}: line 1 is a {kind!r} row, not a 'plan' or 'plan-check' row" in line, line
    assert out.read_bytes() == rows.read_bytes()


def test_an_out_that_is_a_fifo_is_refused_before_the_plan_runs(capsys, tmp_path: Path):
    fifo = tmp_path / "plan.jsonl"
    os.mkfifo(fifo)
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", str(fifo))
    assert f"--out {fifo}: is a FIFO (named pipe), not a regular file" in line, line


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("device", ["/dev/full", "/dev/zero"])
def test_an_out_that_is_a_device_is_refused_before_the_plan_runs(capsys, device: str):
    line = refused_before_planning(capsys, "plan", *PLAN_INPUTS, "--out", device)
    assert f"--out {device}: is a character device, not a regular file" in line, line


def test_the_study_appends_its_rows_only_to_a_file_of_its_own_kinds(cli_error, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    rows = out / "time_to_target.jsonl"
    shutil.copyfile(RESULTS / "plan_bench_charlm.jsonl", rows)
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(out), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5")
    assert f"study time-to-target: {rows}: line 1 is a 'bench' row, not a 'time-to-target-study-config' or" in error
    assert rows.read_bytes() == (RESULTS / "plan_bench_charlm.jsonl").read_bytes()
    assert sorted(path.name for path in out.iterdir()) == ["time_to_target.jsonl"]


def test_the_studies_record_goes_only_to_a_file_of_study_records(cli_error, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "studies.jsonl").write_text('{"kind": "plan", "schema_version": 1}\n')
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(out), "--data", str(tmp_path),
                      "--until", "val/accuracy>=0.5")
    assert f"{out / 'studies.jsonl'}: line 1 is a 'plan' row, not a 'study' row" in error
    assert (out / "studies.jsonl").read_text() == '{"kind": "plan", "schema_version": 1}\n'


@pytest.mark.parametrize("make", [
    lambda path: path.write_text("my notes on batch 16\n"),
    lambda path: path.write_text('{"note": "mine"}\n'),
    lambda path: os.mkfifo(path),
    lambda path: path.mkdir(),
], ids=["text", "json-of-another-shape", "fifo", "folder"])
def test_the_study_refuses_a_users_file_named_like_a_runs_record(cli_error, tmp_path: Path, make):
    """The study writes `RUNS/b16-lr1-s0.command.json` beside run b16-lr1-s0: a file of the user's
    by that name is refused before anything trains, never written over or renamed."""
    runs = tmp_path / "runs"
    runs.mkdir()
    record = runs / "b16-lr1-s0.command.json"
    make(record)
    before = record.read_bytes() if record.is_file() else None
    error = cli_error("study", "time-to-target", "--preset", "smoke", "--out", str(tmp_path / "out"),
                      "--runs-dir", str(runs), "--data", str(tmp_path), "--until", "val/accuracy>=0.5")
    assert f"time-to-target study: {record} is named like the record of one of its runs but " in error, error
    assert "it is never written over: move it away or give another --runs-dir" in error
    assert [path.name for path in runs.iterdir()] == [record.name]
    assert before is None or record.read_bytes() == before


STUDY, BENCH = "time_to_target_study_charlm.jsonl", "plan_bench_charlm.jsonl"


def _committed(tmp_path: Path, name: str, kind: str | None = None, change: Callable[[dict], None] | None = None) -> str:
    """A committed rows file copied into the test's folder, every row of `kind` changed by `change`."""
    records = [json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()]
    for record in records:
        if change is not None and record["kind"] == kind:
            change(record)
    path = tmp_path / name
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def _set(**fields: Any) -> Callable[[dict], None]:
    return lambda record: record.update(fields)


@pytest.mark.parametrize("name, kind, change, said", [
    (BENCH, "bench", _set(samples_per_s=float("inf")), "field samples_per_s must be a positive finite number, not Infinity"),
    (BENCH, "bench", _set(samples_per_s=float("nan")), "field samples_per_s must be a positive finite number, not NaN"),
    (BENCH, "bench", _set(samples_per_s=-900.0), "field samples_per_s must be a positive finite number, not -900.0"),
    (STUDY, "time-to-target-study-fit", _set(e_min=float("inf")), "field e_min must be a finite number of at least 0"),
    (STUDY, "time-to-target-study-fit", _set(draws=[[float("nan"), 1.0]] * 3),
     "field draws[0][0] must be a finite number of at least 0, not NaN"),
    (STUDY, "time-to-target-study-fit", _set(s_min_ci95=[1.0, float("inf")]),
     "field s_min_ci95[1] must be a finite number of at least 0, not Infinity"),
    (STUDY, "time-to-target-study-fit", _set(s_min=0.0, e_min=0.0), "the fit has S_min and E_min both 0"),
    (STUDY, "time-to-target-study-fit", _set(draws=[[1.0, 2.0], [0.0, 0]]), "draw 1 has S_min and E_min both 0"),
    (STUDY, "time-to-target-study-config", _set(until="val/bits_per_char<=nan"),
     "the goal 'val/bits_per_char<=nan' is not METRIC>=VALUE or METRIC<=VALUE with a finite VALUE"),
], ids=["samples-per-s-inf", "samples-per-s-nan", "samples-per-s-negative", "fit-inf", "draw-nan", "bootstrap-inf",
        "fit-of-no-steps", "draw-of-no-steps", "goal-nan"])
def test_inputs_out_of_range_are_one_line_naming_where(cli_error, tmp_path: Path, name, kind, change, said):
    """Each once was a traceback, or a plan that recommended a negative time or a goal of NaN."""
    changed = _committed(tmp_path, name, kind, change)
    other = _committed(tmp_path, STUDY if name == BENCH else BENCH)
    out = tmp_path / "plan.jsonl"
    error = cli_error("plan", changed, other, "--out", str(out))
    assert f"{changed}:" in error and said in error, error
    assert not out.exists()


@pytest.mark.parametrize("targets, said", [
    ("cpu:eagr:fp32", "plan: --targets: target cpu:eagr:fp32: mode 'eagr' is not available on cpu"),
    ("cpu:eager:fp32,gpu:eager:fp32", "plan: --targets: bad target 'gpu:eager:fp32': unknown device 'gpu'"),
    ("cpu:eager", "plan: --targets: bad target 'cpu:eager': write device:mode:precision"),
    (",", "--targets ',': give targets (device:mode:precision) separated by commas, e.g. cpu:eager:fp32,xla:lazy:fp32"),
])
def test_an_unknown_or_ill_formed_target_is_one_line_never_a_row_not_measured(cli_error, tmp_path: Path, targets, said):
    error = cli_error("plan", _committed(tmp_path, BENCH), _committed(tmp_path, STUDY), "--targets", targets)
    assert error.startswith(f"trainspeed: error: {said}"), error


def test_a_target_without_rows_here_is_planned_as_not_measured(capsys, tmp_path: Path):
    from trainspeed.cli import main

    assert main(["plan", _committed(tmp_path, BENCH), _committed(tmp_path, STUDY),
                 "--targets", "cpu:eager:fp32,cuda:compile:bf16"]) == 0
    assert "| cuda:compile:bf16/1/8 | not measured: no bench row of cuda:compile:bf16" in capsys.readouterr().out


def _check_args(tmp_path: Path, study: str, *more: str) -> list[str]:
    return ["plan", _committed(tmp_path, BENCH), study, "--out", str(tmp_path / "plan.jsonl"), "--check", "best",
            "--check-dir", str(tmp_path / "checks"), *more]


def _nothing_written(tmp_path: Path) -> bool:
    return not (tmp_path / "plan.jsonl").exists() and not (tmp_path / "checks").exists()


def test_a_negative_check_seed_is_refused_before_anything_is_written(cli_error, tmp_path: Path):
    error = cli_error(*_check_args(tmp_path, _committed(tmp_path, STUDY), "--check-seed", "-5"))
    assert "argument --check-seed: '-5' must be at least 0" in error and _nothing_written(tmp_path)


@pytest.mark.parametrize("more, said", [
    (("--check-seeds", "0"), "argument --check-seeds: '0' must be at least 1"),
    (("--check-seeds", "101"), "argument --check-seeds: '101' is more than 100 runs of each configuration"),
    (("--check-seed", "2147483647", "--check-seeds", "2"),
     "plan: --check-seed 2147483647 with --check-seeds 2 would train at seeds past 2,147,483,647"),
])
def test_check_seeds_that_cannot_run_are_refused_before_anything_is_written(cli_error, tmp_path: Path, more, said):
    assert said in cli_error(*_check_args(tmp_path, _committed(tmp_path, STUDY), *more)) and _nothing_written(tmp_path)


def test_check_seeds_without_a_check_are_one_line(cli_error, tmp_path: Path):
    error = cli_error("plan", _committed(tmp_path, BENCH), _committed(tmp_path, STUDY), "--check-seeds", "3")
    assert "plan: --check-seeds 3 is the number of runs of each --check configuration; give --check too" in error


@pytest.mark.parametrize("there", [None, "an empty folder"])
def test_study_data_that_is_not_here_is_refused_before_anything_is_written(cli_error, tmp_path: Path, monkeypatch,
                                                                           there: str | None):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the workload can be asked: an empty folder is still no data
    if there is not None:  # a folder, but no data `--data` reads
        (tmp_path / "data" / "text").mkdir(parents=True)
    study = _committed(tmp_path, STUDY)
    error = cli_error(*_check_args(tmp_path, study, "--workload", "char_lm_workload:CharLMWorkload"))
    assert f"--check trains on the study's data data/text ({study}:1), which is not here" in error
    assert there is None or f"(data/text: {there};" in error
    assert _nothing_written(tmp_path)


def _text_data(tmp_path: Path) -> None:
    """The study's data where its rows say it lies: a token folder (data/text/train.bin)."""
    (tmp_path / "data" / "text").mkdir(parents=True)
    (tmp_path / "data" / "text" / "train.bin").write_bytes(bytes(range(256)) * 4)


def _user_module(tmp_path: Path, monkeypatch) -> tuple[str, str]:
    """A study whose rows name a module that lies beside them, importable from here, which leaves a
    file behind where it is imported; and that module's workload name."""
    module = "module_beside_the_rows"
    (tmp_path / f"{module}.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    _text_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"{module}:Workload"

    def rename(record: dict) -> None:
        record["workload"] = name
        record["settings"]["workload"] = name

    return _committed(tmp_path, STUDY, "time-to-target-study-config", rename), name


def test_a_users_module_named_only_by_the_rows_is_never_imported(cli_error, tmp_path: Path, monkeypatch):
    study, name = _user_module(tmp_path, monkeypatch)
    error = cli_error(*_check_args(tmp_path, study))
    assert error == (f"trainspeed: error: plan: --check would import {name}, a module the study's rows name ({study}:1); "
                     f"rows are data and never choose code to run: give --workload {name} if it is yours to run")
    error = cli_error(*_check_args(tmp_path, study, "--workload", "mahjong"))
    assert f"plan: --workload mahjong: the study ({study}:1) trained {name}" in error
    assert _nothing_written(tmp_path) and not (tmp_path / "imported").exists()
    assert "module_beside_the_rows" not in sys.modules


def test_a_users_module_is_trained_where_the_user_names_it_too(tmp_path: Path, monkeypatch):
    from trainspeed.plan.check import check_recipe, check_runnable
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model

    study, name = _user_module(tmp_path, monkeypatch)
    inputs = read_plan_inputs([Path(_committed(tmp_path, BENCH)), Path(study)])
    recipe = check_recipe(inputs, steps_model(inputs))
    check_runnable(inputs, recipe, name)  # the user's choice: the runs may import it
    with pytest.raises(UsageError, match="a module the study's rows name"):
        check_runnable(inputs, recipe, None)
    assert not (tmp_path / "imported").exists()


@pytest.mark.parametrize("workload", ["mahjong", "hf:gpt2", "timm:resnet18"])
def test_a_built_in_workload_or_a_library_model_needs_no_workload_flag(tmp_path: Path, monkeypatch, workload):
    from trainspeed.plan.check import check_recipe, check_runnable
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model

    _text_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    study = _committed(tmp_path, STUDY, "time-to-target-study-config",
                       lambda record: record["settings"].update(workload=workload))
    inputs = read_plan_inputs([Path(_committed(tmp_path, BENCH)), Path(study)])
    check_runnable(inputs, check_recipe(inputs, steps_model(inputs)), None)


def test_the_workload_flag_belongs_to_the_check(cli_error, tmp_path: Path):
    error = cli_error("plan", _committed(tmp_path, BENCH), _committed(tmp_path, STUDY), "--workload", "mahjong")
    assert "plan: --workload names the workload --check trains and --measure runs; give it with one of them" in error


def test_study_settings_that_train_refuses_here_are_refused_before_anything_is_written(cli_error, tmp_path: Path,
                                                                                       monkeypatch):
    """A study run with 4,096 threads elsewhere: its check's `trainspeed train` refuses them on this machine."""
    _text_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    study = _committed(tmp_path, STUDY, "time-to-target-study-config",
                       lambda record: record["settings"].update(threads=4096))
    error = cli_error(*_check_args(tmp_path, study, "--workload", "char_lm_workload:CharLMWorkload"))
    assert "plan: --check cpu:eager:fp32/1/8: its `trainspeed train` would refuse the recipe's settings: " in error
    assert "argument --threads: '4096' is more than" in error and _nothing_written(tmp_path)


def test_the_best_and_the_batches_beside_it_are_named_before_any_check_runs(tmp_path: Path):
    """`best-smaller` and `best-larger` are the best's target and devices at the nearest fixed batches
    predicted below and above its own; where there is none, one line says to add a batch."""
    from trainspeed.plan.check import chosen
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model
    from trainspeed.plan.plan import PlanGrid, plan_rows

    inputs = read_plan_inputs([Path(_committed(tmp_path, BENCH)), Path(_committed(tmp_path, STUDY))])
    grid = PlanGrid(("cpu:eager:fp32",), (1,), (4, 8, 16, 32, 64, 128), ("fixed",))
    rows = plan_rows(inputs, grid, "trainspeed plan", steps_model(inputs))
    best, smaller, larger = chosen(rows, ["best", "best-smaller", "best-larger"])
    batches = sorted(row.global_batch for row in rows if row.status == "predicted")
    at = batches.index(best.global_batch)
    assert best.recommended and 0 < at < len(batches) - 1, "the committed study's best is inside the grid"
    assert (smaller.global_batch, larger.global_batch) == (batches[at - 1], batches[at + 1])
    assert {smaller.target, larger.target, smaller.devices, larger.devices} == {best.target, best.devices}
    edge = PlanGrid(("cpu:eager:fp32",), (1,), (best.global_batch,), ("fixed",))
    with pytest.raises(UsageError, match="no fixed batch larger than the best configuration's was predicted"):
        chosen(plan_rows(inputs, edge, "trainspeed plan", steps_model(inputs)), ["best-larger"])


def test_a_check_trains_the_study_s_recipe_at_its_batch_on_the_configuration_s_target_and_devices(tmp_path: Path):
    """The check's command is the study's run at the batch's best learning-rate factor (its settings row's
    recipe), with the configuration's target and devices, the check's seed and folder."""
    import math

    from trainspeed.plan.check import check_commands, check_recipe, chosen
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model
    from trainspeed.plan.plan import default_grid, plan_rows
    from trainspeed.train.flags import config_of_command

    inputs = read_plan_inputs([Path(_committed(tmp_path, BENCH)), Path(_committed(tmp_path, STUDY))])
    rows = plan_rows(inputs, default_grid(inputs, None, (2,), None), "trainspeed plan", steps_model(inputs))
    (row,) = chosen(rows, ["best"])
    recipe = check_recipe(inputs, steps_model(inputs))
    (command,) = check_commands(recipe, [row], {row.config: tmp_path / "check"}, seed=1000).values()
    config, settings = config_of_command(command), inputs.settings
    factor = next(batch.best_lr_factor for batch in inputs.study_batches if batch.global_batch == row.global_batch)
    assert (config.target, config.launch.nproc, config.batch_size_per_device * 2) == (row.target, 2, row.global_batch)
    assert (config.workload, config.size, config.data, config.until) == (
        settings.workload, settings.size, settings.settings.data, settings.until)
    assert config.lr.base_lr == pytest.approx(settings.base_lr * factor * math.sqrt(row.global_batch / settings.reference_batch),
                                              rel=1e-5)
    assert (config.lr.scaling, config.lr.min_lr_ratio, config.stop_at_target, config.seed) == ("none", 1.0, True, 1000)
    assert config.steps == settings.settings.max_samples // row.global_batch and config.out_dir == str(tmp_path / "check")
    assert config.noise_scale_micro_batches == 1 and not config.progress


def test_an_auto_check_trains_the_study_s_recipe_growing_over_the_range_the_plan_predicted(tmp_path: Path):
    """With the committed char-LM study and a run to its goal (the noise scale's profile), the plan
    predicts `auto`; its check is `train --batch-schedule auto` from the smallest to the largest
    batch, at the study's rule (base LR x the best factor at the smallest batch, scaled by sqrt from
    the reference batch), its warm-up samples and its budget, in micro-batches on one rank, by the
    noise scale's rule the plan predicts (`--auto-step-times off`)."""
    from trainspeed.plan.check import check_commands, check_recipe, chosen
    from trainspeed.plan.inputs import read_plan_inputs
    from trainspeed.plan.model import steps_model
    from trainspeed.plan.plan import default_grid, plan_rows
    from trainspeed.train.flags import config_of_command

    goal_run = RESULTS / "plan_charlm" / "checks" / "cpu-eager-fp32-1-8"
    inputs = read_plan_inputs([Path(_committed(tmp_path, BENCH)), Path(_committed(tmp_path, STUDY)), goal_run])
    model = steps_model(inputs)
    rows = plan_rows(inputs, default_grid(inputs, None, (1,), None, None, model), "trainspeed plan", model)
    (row,) = chosen(rows, ["cpu:eager:fp32/1/auto:8..512"])
    (command,) = check_commands(check_recipe(inputs, model), [row], {row.config: tmp_path / "check"}, seed=1000).values()
    config, settings = config_of_command(command), inputs.settings
    factor = next(batch.best_lr_factor for batch in inputs.study_batches if batch.global_batch == 8)
    assert (config.batch.schedule, config.batch.global_batch_min, config.batch.global_batch_max,
            config.batch.auto_step_times) == ("auto", 8, 512, "off")
    assert (config.lr.scaling, config.lr.reference_batch) == ("sqrt", settings.reference_batch)
    assert config.lr.base_lr == pytest.approx(settings.base_lr * factor, rel=1e-5)
    assert config.lr.warmup_steps == settings.settings.warmup_samples // 8 and config.lr.min_lr_ratio == 1.0
    assert (config.samples, config.steps, config.noise_scale_micro_batches) == (settings.settings.max_samples, None, 2)
    assert (config.until, config.stop_at_target, config.seed, config.target) == (settings.until, True, 1000, row.target)
