"""`trainspeed study`: every study at its smallest size, as a user runs it (`study all --preset
smoke`, once for this module), its rows, and the report of the whole folder; bad flags are one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_commands import run_child, run_trainspeed

from trainspeed.bench.ratios import ratio_table, remote_pairs
from trainspeed.bench.results import ResultRow
from trainspeed.cli import main
from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.kinds import read_inputs
from trainspeed.studies.batch_size.report import ROW_TYPES as BATCH_SIZE_ROWS
from trainspeed.studies.batch_size.rows import (
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
)
from trainspeed.studies.remote.links import namespaces_possible
from trainspeed.studies.rows import StudyRecord
from trainspeed.studies.scaling.rows import ScalingRunRow, io_efficiency

pytestmark = pytest.mark.long

REPO_ROOT = Path(__file__).resolve().parents[2]


def _namespaces() -> set[str]:
    result = run_child(["ip", "netns", "list"], timeout=60)
    return set(result.stdout.split()) if result.returncode == 0 else set()


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, str, set[str]]:
    """`trainspeed study all --preset smoke`: the folder, what it printed, the namespaces before."""
    out = tmp_path_factory.mktemp("study")
    before = _namespaces()
    result = run_trainspeed("study", "all", "--preset", "smoke", "--out", str(out), timeout=3000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout, before


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


@pytest.mark.slow
@pytest.mark.e2e
def test_all_prints_its_estimate_before_it_starts_and_records_every_study(study):
    out, printed, _ = study
    first, *plan = printed.splitlines()[:5]
    assert first.startswith("study all (smoke): about ") and f"rows go to {out}" in first
    assert [line.split(":")[0].strip() for line in plan] == ["throughput", "remote", "scaling", "batch-size"]
    records = [read.row for read in read_inputs([out / "studies.jsonl"]).of(StudyRecord)]
    assert [record.study for record in records] == ["throughput", "remote", "scaling", "batch-size", "all"]
    assert all(record.wall_s > 0 and record.estimate_s > 0 and record.machine.cores_usable for record in records)


@pytest.mark.slow
@pytest.mark.e2e
def test_throughput_rows_are_one_bench_run_device_and_host_fed(study):
    out, _, _ = study
    rows = [read.row for read in read_inputs([out / "throughput.jsonl"]).of(ResultRow)]
    assert {(row.target, row.feed) for row in rows} == {(t, f) for t in ("cpu:eager:fp32", "cpu:eager:bf16")
                                                        for f in ("device", "host")}
    assert len({row.run_id for row in rows}) == 1 and all(row.status == "ok" for row in rows)
    table = ratio_table(rows)
    assert table.baseline == "cpu:eager:fp32" and table.ratio("cpu:eager:bf16", 16) is not None
    assert all(row.command.startswith("trainspeed study all") for row in rows)


@pytest.mark.slow
@pytest.mark.e2e
def test_remote_rows_pair_with_their_runs_local_row_over_loopback_and_a_labelled_link(study):
    out, _, before = study
    rows = [read.row for read in read_inputs([out / "remote.jsonl"]).of(ResultRow)]
    pairs = remote_pairs(rows)
    kind = "netns" if namespaces_possible() is None else "client-side"
    assert sorted((p.remote.link.split("-")[0], p.remote.in_flight) for p in pairs) == sorted(
        [("loopback", 1), ("loopback", 2), (kind.split("-")[0], 1), (kind.split("-")[0], 2)])
    assert all(p.local is not None and p.local.run_id == p.remote.run_id and p.ratio > 0 for p in pairs)
    assert all(p.remote.bytes_sent_per_step >= p.local.bytes_per_step > 0 for p in pairs)
    # The server's time is summed over the steps of each of the client's windows: the same steps,
    # so a wire time (client step - server step) below zero is ruled out, not left to the load.
    assert all(len(p.remote.server_window_s) == p.remote.windows and p.remote.wire_time_suspect is False
               for p in pairs)
    assert _namespaces() == before, "the study left network namespaces behind"


@pytest.mark.slow
@pytest.mark.e2e
def test_scaling_rows_compare_ranks_and_data_within_the_study(study):
    out, _, _ = study
    rows = [read.row for read in read_inputs([out / "scaling.jsonl"]).of(ScalingRunRow)]
    assert sorted((row.world_size, row.data) for row in rows) == [(1, "real"), (1, "synthetic"), (2, "real"),
                                                                  (2, "synthetic")]
    assert len({row.study_id for row in rows}) == 1 and all(row.bench_samples_per_s for row in rows)
    assert all(io_efficiency(rows, 32, ranks) > 0 for ranks in (1, 2))
    assert all(row.machine.cores_usable and row.workload_sha256 for row in rows)


@pytest.mark.slow
@pytest.mark.e2e
def test_batch_size_rows_hold_settings_runs_evaluations_and_a_verdict(study):
    out, _, _ = study
    inputs = read_inputs([out / "batch_size.jsonl"])
    kinds = [type(read.row) for read in inputs.of(*BATCH_SIZE_ROWS)]
    assert kinds[0] is BatchSizeSettingsRow and kinds.count(BatchSizeRunRow) == 4  # 2 batches x 2 seeds
    comparisons = [read.row for read in inputs.of(*BATCH_SIZE_ROWS) if isinstance(read.row, BatchSizeComparisonRow)]
    assert sorted(row.framing for row in comparisons) == ["equal samples", "equal steps", "equal wall time", "head to head"]
    assert all((row.global_batch, row.versus_batch) == (64, 32) for row in comparisons)
    assert all(row.verdict in ("supported", "contradicted")
               or row.verdict.startswith("inconclusive at a minimum detectable difference of ") for row in comparisons)
    # every final policy against the rule-based agents, batch 32 at batch 64's last step, head to head
    assert len(inputs.of(MahjongEvalRow)) >= 4 + 2 + 2 and {read.row.games for read in inputs.of(MahjongEvalRow)} == {8}


@pytest.mark.slow
@pytest.mark.e2e
def test_the_report_reads_the_whole_study_folder(study, tmp_path):
    out, _, _ = study
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    html = page.read_text()
    for section in ("ratio", "scaling", "remote", "selfplay", "batch-size-study", "studies"):
        assert f'<section id="{section}">' in html, section


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
