"""One rank through the CLI: what a run writes (metrics, TensorBoard, summary) and bad flags."""

from __future__ import annotations

import os
import json
import math
from pathlib import Path

import pytest
from train_runs import TINY_RUN

from trainspeed.bench.results import ResultRow
from trainspeed.cli import main
from trainspeed.data.base import LoaderConfig
from trainspeed.rows import row_line


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.e2e
def test_a_run_on_real_data_logs_train_and_val_rows_tensorboard_and_a_summary(
    tmp_path: Path, data_args: list[str]
) -> None:
    from trainspeed.workloads.mahjong.data.loader import open_mahjong_shards
    code = main(["train", *TINY_RUN, *data_args, "--batch-size-per-device", "64", "--epochs", "0.1",
                 "--num-workers", "1", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = _rows(tmp_path)
    assert {row["kind"] for row in rows} == {"train", "val", "noise-scale", "train-summary"}
    train_rows = [row for row in rows if row["kind"] == "train"]
    last = summary["last_step"]
    batches_per_epoch = len(open_mahjong_shards(data_args[1], LoaderConfig(batch_size=64)))
    assert last == math.ceil(0.1 * batches_per_epoch)
    logged = sorted(set(range(2, last + 1, 2)) | {last})
    assert [row["step"] for row in train_rows] == logged
    assert all(0.0 <= row["data_wait_fraction"] <= 1.0 and row["samples_per_s"] > 0 for row in train_rows)
    validation = summary["validation"]
    assert 0.0 <= validation["accuracy"] <= 1.0 and 0.0 < validation["majority_baseline"] <= 1.0
    assert validation["samples"] > 0 and validation["loss"] > 0
    assert [row for row in rows if row["kind"] == "val"][-1]["accuracy"] == validation["accuracy"]
    assert summary["end_to_end_samples_per_s"] == pytest.approx(summary["samples"] / summary["wall_s"])
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_the_lr_follows_warmup_then_cosine_in_the_log(tmp_path: Path) -> None:
    code = main(["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "20",
                 "--warmup-steps", "4", "--lr-scaling", "none", "--min-lr-ratio", "0.0", "--out", str(tmp_path)])
    assert code == 0
    lrs = {row["step"]: row["lr"] for row in _rows(tmp_path) if row["kind"] == "train"}
    # The logged LR is the one the next step will use: step 4 of 20 (after warm-up) is the peak.
    assert lrs[2] == pytest.approx(3e-3 * 3 / 4)
    assert lrs[4] == pytest.approx(3e-3)
    assert lrs[12] == pytest.approx(3e-3 * 0.5 * (1 + math.cos(math.pi * 8 / 15)))


def test_io_efficiency_is_per_device_throughput_over_the_bench_row(tmp_path: Path) -> None:
    bench = tmp_path / "bench.jsonl"
    row = ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target="cpu:eager:fp32",
                    batch_size=8, status="ok", samples_per_s=500.0)
    bench.write_text(row_line(row) + "\n")
    code = main(["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "12",
                 "--bench-jsonl", str(bench), "--out", str(tmp_path / "run")])
    assert code == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["bench_samples_per_s"] == 500.0
    assert summary["io_efficiency"] == pytest.approx(summary["samples_per_s_per_device"] / 500.0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--synthetic-data", "--data", "x", "--steps", "1"], "exactly one of --data DIR or --synthetic-data"),
        (["--synthetic-data"], "exactly one of --steps N or --epochs E"),
        (["--synthetic-data", "--steps", "1", "--nnodes", "2"], "--rdzv-endpoint"),
        (["--synthetic-data", "--steps", "1", "--batch-size-per-device", "0"],
         "argument --batch-size-per-device: '0' must be at least 1"),
        (["--data", "/nonexistent/shards", "--steps", "1"], "no such file or directory"),
        (["--data", ".", "--epochs", "inf"], "argument --epochs: 'inf' is not a finite number"),
        (["--synthetic-data", "--epochs", "2"], "train: --synthetic-data has no epochs; use --steps N"),
        (["--synthetic-data", "--steps", "1", "--eval-batches", "0"], "train: --eval-batches must be >= 1, got 0"),
        (["--synthetic-data", "--steps", "1", "--log-every", "0"],
         "train: --log-every must be a finite number > 0, got 0"),
        (["--synthetic-data", "--steps", "1", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400",
          "--node-rank", "2"],
         "train: --node-rank 2 must be in [0, --nnodes)"),
        (["--synthetic-data", "--steps", "1", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400",
          "--target", "jax:jit:fp32"],
         "train: jax:jit:fp32 runs one process per host, each knowing its place: add --rdzv-backend static"),
    ],
)
def test_bad_flags_fail_with_one_line_naming_the_flag(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["train", *flags, "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("trainspeed: error: ") and message in error[0]


@pytest.mark.parametrize(("settings", "message"), [
    ({"keep_checkpoints": -1}, "train: --keep-checkpoints -1: give 0 (keep all) or more"),
    ({"eval_every": -3}, "train: --eval-every must be >= 0, got -3"),
    ({"lr": {"min_lr_ratio": 1.5}}, "train: --min-lr-ratio must be in [0, 1], got 1.5"),
    ({"lr": {"scaling": "cube"}}, "train: --lr-scaling 'cube': choose one of none, linear, sqrt"),
    ({"launch": {"rdzv_backend": "etcd"}}, "train: --rdzv-backend 'etcd': choose one of c10d, static"),
], ids=["keep-checkpoints", "eval-every", "min-lr-ratio", "lr-scaling", "rdzv-backend"])
def test_settings_the_parser_never_passes_are_refused_when_a_config_is_built_in_python(
    settings: dict, message: str
) -> None:
    """The CLI's parser refuses these values first; a TrainConfig made in Python (a study, a test,
    a script) goes through the same checks before it runs."""
    import dataclasses

    from trainspeed.errors import UsageError
    from trainspeed.train.config import LaunchConfig, LRConfig, TrainConfig

    nested = {"lr": LRConfig, "launch": LaunchConfig}
    fields = {key: dataclasses.replace(nested[key](), **value) if key in nested else value
              for key, value in settings.items()}
    with pytest.raises(UsageError) as refused:
        TrainConfig(synthetic_data=True, steps=1, **fields).validate()
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--target", "cpu:eager:fp8"], "precision 'fp8' is not available on cpu"),
        (["--target", "tpu:eager:fp32"], "unknown device 'tpu'"),
        (["--workload", "chess"], "unknown workload 'chess'"),
        (["--size", "huge"], "--size 'huge' is not a size of workload mahjong"),
        (["--bench-jsonl", "no/such/bench.jsonl"], "no/such/bench.jsonl does not exist"),
        (["--bench-jsonl", "CORRUPT"], ":2: not a trainspeed result row"),
        (["--lr", "nan"], "argument --lr: 'nan' is not a finite number"),
        (["--lr", "inf"], "argument --lr: 'inf' is not a finite number"),
        (["--batch-size-per-device", "100000000000"], "the synthetic batches of 2 rank(s) alone would take"),
        (["--threads", "100000"], f"argument --threads: '100000' is more than {os.cpu_count()} threads, more than "
                                  "this machine's CPUs"),
        (["--num-workers", "100000"], "loader processes per rank, more than this machine's CPUs"),
        (["--nproc", "100000"], "devices per node (a host with more has never been built)"),
        (["--nproc", str(os.cpu_count() + 1)], "processes, more than this machine's CPUs (cpu:eager:fp32 runs one "
                                               "process per device)"),
        (["--steps", "1000000000"], "more than 999999999 steps (a checkpoint's name holds its step in 9 digits)"),
        (["--collective-timeout-s", "1e300"], "argument --collective-timeout-s: '1e300' is more than 2147483 s"),
        (["--seed", "-1"], "argument --seed: '-1' must be at least 0"),
    ],
)
def test_every_flag_and_file_is_checked_before_any_rank_starts(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    corrupt = tmp_path / "bench.jsonl"
    row = ResultRow(run_id="r", timestamp="t", workload="mahjong", size="tiny", target="cpu:eager:fp32",
                    batch_size=8, status="ok", samples_per_s=500.0)
    corrupt.write_text(row_line(row) + "\n{not json\n")
    flags = [str(corrupt) if flag == "CORRUPT" else flag for flag in flags]
    out = tmp_path / "run"
    code = main(["train", *TINY_RUN, "--synthetic-data", "--steps", "2", "--nproc", "2", *flags, "--out", str(out)])
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("trainspeed: error:") and message in error[0], error
    assert not out.exists(), "nothing is written before the input is checked"


@pytest.mark.e2e
def test_a_batch_larger_than_the_training_split_is_refused_before_any_work(
    tmp_path: Path, data_args: list[str], capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    code = main(["train", *TINY_RUN, *data_args, "--batch-size-per-device", "100000000000", "--steps", "2",
                 "--out", str(out)])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1 and "fewer than one global batch of 100000000000" in error[0], error
    assert not out.exists()


def test_no_timing_warmup_measures_the_steady_state_from_the_first_step(tmp_path: Path) -> None:
    code = main(["train", *TINY_RUN, "--synthetic-data", "--batch-size-per-device", "8", "--steps", "4",
                 "--timing-warmup-steps", "0", "--out", str(tmp_path)])
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steady_samples_per_s"] > 0 and summary["steady_data_wait_fraction"] is not None
