"""auto_vs_fixed.py gives every configuration the same recipe, counted from the batch it starts at,
and takes its ratios over the seeds both configurations reached the goal on."""

import shutil
from pathlib import Path

import pytest

from benchmarks.auto_vs_fixed import (Recipe, RunResult, first_batches, flag_value, machine_footer, parse_configuration,
                                      replot, summarize, train_command)
from trainspeed.machine import Machine

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

RECIPE = Recipe(workload="mahjong", size="tiny", data="data", until="val/accuracy>=0.85", eval_every_samples=4096,
                val_samples=2048, warmup_samples=4096, max_samples=393216, threads=1, num_workers=1, log_every=16)


def test_the_run_starts_at_the_fixed_batch_auto_s_minimum_or_the_schedule_s_first_entry():
    assert first_batches(["--batch-size-per-device", "32"]) == (32, 32)
    assert first_batches(["--nproc", "2", "--batch-size-per-device", "64"]) == (128, 64)
    assert first_batches(["--nproc", "2", "--batch-schedule", "auto", "--global-batch-min", "32"]) == (32, 16)
    assert first_batches(["--batch-schedule=64@0,128@20000"]) == (64, 64)
    assert flag_value(["--lr", "1", "--lr=2"], "--lr") == "2" and flag_value([], "--lr") is None


def test_warm_up_and_validation_are_counted_in_samples_and_auto_runs_by_samples():
    auto = train_command(RECIPE, parse_configuration("auto=--batch-schedule auto --global-batch-min 32 --lr 0.0012"),
                         1, Path("out"))
    assert flag_value(auto, "--samples") == "393216" and "--steps" not in auto
    assert flag_value(auto, "--warmup-steps") == "128" and flag_value(auto, "--eval-batches") == "64"
    assert flag_value(auto, "--noise-scale-micro-batches") == "2" and flag_value(auto, "--seed") == "1"
    fixed = train_command(RECIPE, parse_configuration("b=--batch-size-per-device 64"), 0, Path("out"))
    assert "--noise-scale-micro-batches" not in fixed  # a fixed batch as a user runs it: the meter's defaults
    two = train_command(RECIPE, parse_configuration("b=--nproc 2 --batch-size-per-device 64"), 0, Path("out"))
    assert flag_value(two, "--steps") == "3072" and flag_value(two, "--warmup-steps") == "32"
    assert flag_value(two, "--eval-batches") == "32" and "--noise-scale-micro-batches" not in two


def run(config, seed, command_s, reached=True):
    return RunResult(config=config, seed=seed, order=0, ranks=1, reached=reached, command_s=command_s, train_s=command_s / 2,
                     wall_s=None, startup_s=None, steps=10, samples=320, value=0.9, start_global_batch=32,
                     final_global_batch=32)


def test_the_ratio_is_over_the_seeds_both_reached():
    configurations = [parse_configuration("auto=--batch-schedule auto --global-batch-min 32"),
                      parse_configuration("fixed=--batch-size-per-device 32")]
    results = [run("auto", 0, 30.0), run("fixed", 0, 20.0), run("auto", 1, 50.0), run("fixed", 1, 10.0, reached=False)]
    auto, fixed = summarize(results, configurations, "fixed")
    assert auto["command_s_ratio_to_fixed"] == 1.5 and auto["ratio_seeds"] == [0]
    assert auto["command_s_mean"] == 40.0 and (auto["command_s_min"], auto["command_s_max"]) == (30.0, 50.0)
    assert fixed["reached"] == 1 and "command_s_ratio_to_fixed" not in fixed
    assert auto["command_s_paired_ratio_to_fixed"] == 1.5 and auto["command_s_paired_ratio_low"] is None  # one pair


def test_the_paired_ratio_is_the_geometric_mean_of_seed_ratios_with_a_t_interval():
    from benchmarks.auto_vs_fixed import paired_ratio

    centre, low, high = paired_ratio([(2.0, 1.0), (8.0, 4.0), (1.0, 1.0), (None, 3.0)])
    assert centre == pytest.approx(2 ** (2 / 3)) and low < centre < high
    assert paired_ratio([(1.1, 1.0), (1.1, 1.0)])[1:] == pytest.approx((1.1, 1.1))  # no spread, no width
    assert paired_ratio([]) == (None, None, None)


def test_the_figure_is_drawn_again_from_committed_rows_with_the_machine_and_its_load(tmp_path: Path):
    """A configuration that missed the goal on every seed (hf:gpt2's default batch) and an auto run
    that never switched are in the rows; replotting reads them and writes the figure beside them."""
    rows = tmp_path / "auto_vs_fixed_gpt2.jsonl"
    shutil.copy(RESULTS / "auto_vs_fixed_gpt2.jsonl", rows)
    replot(rows)
    assert rows.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = [RunResult("auto", 0, 0, 1, True, 10.0, 5.0, 6.0, 1.0, 8, 64, 0.9, 8, 8, load_before=1.25, load_after=2.5),
            RunResult("fixed", 0, 1, 1, False, 20.0, None, None, None, None, None, None, 8, 8, load_before=2.5,
                      load_after=0.5)]
    line = machine_footer(runs, Machine.at_start())
    assert line.startswith("2 runs, one after another, on ") and "load average 0.5 to 2.5 around the runs" in line
