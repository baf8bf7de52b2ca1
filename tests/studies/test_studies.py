"""`trainspeed study`: its help, each study's face, presets and flags, and bad flags in one line.
Each study at its smallest size is run by its own module beside this one (`test_study_*.py`)."""

from __future__ import annotations

import pytest

from trainspeed.cli import main


def test_study_help_lists_every_study(capsys):
    with pytest.raises(SystemExit):
        main(["study", "--help"])
    listed = capsys.readouterr().out
    for name in ("throughput", "remote", "scaling", "batch-size", "all"):
        assert f"    {name}" in listed


@pytest.mark.parametrize(("study", "flag", "default"), [
    ("throughput", "--windows", "(default: 3; at --preset smoke 1, full 5)"),
    ("throughput", "--targets", "(default: the study's targets available here; at --preset smoke "
     "cpu:eager:fp32,cpu:eager:bf16)"),
    ("batch-size", "--batches", "(default: 256,2048; at --preset smoke 32,64, full 256,1024,8192)"),
    ("batch-size", "--data", "(default: OUT/batch_size_data)"),
    ("scaling", "--threads", "(default: 1)"),
    ("time-to-target", "--seeds", "(default: 2; at --preset full 3)"),
])
def test_a_flags_help_shows_its_default_at_every_preset(study, flag, default, capsys):
    """The default is the config's field, or the preset's where it sets one: written once, never in the help."""
    with pytest.raises(SystemExit):
        main(["study", study, "--help"])
    listed = " ".join(capsys.readouterr().out.split())
    its_help = listed[listed.rindex(f"{flag} {flag[2:].replace('-', '_').upper()} "):]
    assert its_help.split(")")[0] + ")" == its_help[:its_help.index(default) + len(default)], its_help


@pytest.mark.parametrize("name", ["throughput", "remote", "scaling", "batch-size", "time-to-target", "critical-batch",
                                  "all"])
def test_every_study_face_finds_its_runner_and_report_part(name):
    from trainspeed.studies import STUDIES

    study = STUDIES[name]
    module = study.runner()
    assert all(callable(getattr(module, what)) for what in ("config_from_args", "units", "estimate_s", "rows_files", "run"))
    part = study.report_part()
    assert part is None or part.kinds


def test_study_all_names_the_studies_it_runs_in_their_order():
    """Its `--only` flag reads without torch, so its face names the studies its runner runs."""
    from trainspeed.studies.everything.config import STUDY_NAMES
    from trainspeed.studies.everything.study import STUDIES

    assert tuple(study.name for study in STUDIES) == STUDY_NAMES


@pytest.mark.parametrize(("argv", "settings"), [
    (["scaling", "--preset", "smoke"], {"steps": 4, "ranks": (1, 2), "batch_sizes": (32,)}),
    (["scaling", "--preset", "smoke", "--steps", "9", "--batch-sizes", "8,16"], {"steps": 9, "batch_sizes": (8, 16)}),
    (["batch-size", "--lr-factors", "1,3", "--seeds", "0,2"], {"samples": 65536, "lr_factors": (1.0, 3.0),
                                                               "seeds": (0, 2)}),
])
def test_the_flags_given_override_the_preset_and_the_rest_is_the_presets(argv, settings, tmp_path):
    from trainspeed.cli import build_parser

    args = build_parser().parse_args(["study", *argv, "--out", str(tmp_path)])
    config = args.face.runner().config_from_args(args, tmp_path)
    assert {name: getattr(config, name) for name in settings} == settings


@pytest.mark.parametrize(("argv", "message"), [
    (["throughput", "--targets", "gpu:eager:fp32"], "unknown device 'gpu'"),
    (["throughput", "--feed", "sideways"], "--feed 'sideways': give device"),
    (["throughput", "--feed", "device,data"], "'data' is not one of device, host"),  # the studies have no --data
    (["remote", "--feed", "data"], "'data' is not one of device, host"),
    (["remote", "--links", "loopback,fast"], "--links: bad link 'fast'"),
    (["remote", "--emulation", "magic"], "--emulation 'magic'"),
    (["scaling", "--ranks", "2,4"], "must include 1"),
    (["all", "--preset", "huge"], "--preset 'huge': choose one of smoke, quick, full"),
    # every setting is checked as the study's own commands check it, before anything is written
    (["scaling", "--size", "huge"], "scaling study: --size 'huge' is not a size of workload mahjong"),
    (["batch-size", "--target", "gpu:eager:fp32"], "batch-size study: bad target 'gpu:eager:fp32': unknown device 'gpu'"),
    (["remote", "--target", "remote:127.0.0.1:1/cpu:eager:fp32"], "must be a local target"),
    (["throughput", "--size", "huge"], "--size 'huge' is not a size of workload mahjong"),
    (["batch-size", "--threads", "100000"], "'100000' is more than"),
    (["scaling", "--num-workers", "100000"], "'100000' is more than"),
    (["batch-size", "--base-lr", "1e300"], "'1e300' is more than 10"),
    (["batch-size", "--lr-factors", "1,1e300"], "give positive numbers up to 1000"),
    (["batch-size", "--assumed-within-deal-correlation", "-1"], "'-1' must be at least -0.333333"),
    (["batch-size", "--assumed-seed-sd", "1e300"], "'1e300' is more than 3"),
    (["batch-size", "--batches", "256,1024", "--samples", "2147483648"], "is more than 2147483647"),
    (["batch-size", "--batches", "256,1024", "--samples", "2147221504"], "longer than --max-hours 48"),
])
def test_bad_flags_are_one_line_and_exit_2_before_anything_runs(argv, message, tmp_path, capsys):
    """A flag the study refuses is one line, exit 2, and no file written (nor its data made)."""
    out = tmp_path / "out"
    assert main(["study", *argv, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: ") and message in line, line
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("study", ["scaling", "batch-size"])
def test_a_data_folder_of_another_kind_is_refused_before_anything_runs(study, tmp_path, capsys):
    """A run directory named as --data: the study would have made its self-play set inside it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text("{}\n")
    out = tmp_path / "out"
    assert main(["study", study, "--preset", "smoke", "--data", str(run), "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"trainspeed: error: {study} study: --data {run}: holds a training run"), line
    assert sorted(path.name for path in run.iterdir()) == ["train_config.json"]
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("study", ["scaling", "batch-size"])
def test_a_finished_dataset_of_another_format_is_refused_as_data(study, tmp_path, capsys):
    """A whole shard set, but not of Mahjong: the study would train its model on columns it lacks."""
    import numpy as np

    from trainspeed.data.dataset import write_dataset

    data = tmp_path / "arrays"
    write_dataset({"x": np.arange(40)}, data)
    before = sorted(path.name for path in data.iterdir())
    out = tmp_path / "out"
    assert main(["study", study, "--preset", "smoke", "--data", str(data), "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"trainspeed: error: {study} study: --data {data} holds a 'trainspeed-arrays' dataset, not "
                    "Mahjong shards; give a folder of Mahjong shards or a new one for the study to make"), line
    assert sorted(path.name for path in data.iterdir()) == before
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.e2e
def test_a_finished_set_of_mahjong_shards_is_taken_as_data_unchanged(selfplay_data):
    from trainspeed.studies.checks import check_study_data

    before = {path: path.stat().st_mtime_ns for path in selfplay_data.rglob("*")}
    assert check_study_data("scaling", str(selfplay_data), games=22, seed=0) is None
    assert {path: path.stat().st_mtime_ns for path in selfplay_data.rglob("*")} == before
