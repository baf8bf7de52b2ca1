"""Small result rows of every kind the report reads, written into a test's folder."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from trainspeed.bench.results import ResultRow
from trainspeed.train.summary import RunSummary

INVALID_SAMPLES_PER_S = 98765.4321
"""The samples/s of the invalid row: a number that must never appear on the page."""
BENCH_COMMAND = "trainspeed bench --workload mahjong --size tiny --targets cpu:eager:fp32,cpu:compile:fp32 --out b.jsonl"
ENVIRONMENT = dict(device_name="Test CPU (2 threads)", threads=2, torch_version="2.9.0+cpu", python_version="3.11.7",
                   hostname="testhost")


def bench(target: str, batch_size: int, status: str = "ok", samples_per_s: float | None = None, **fields: Any) -> dict:
    measured = status in ("ok", "invalid")
    value = samples_per_s if samples_per_s is not None else 1000.0 + batch_size
    row = ResultRow(
        run_id="r1", timestamp="2026-01-01T00:00:00+00:00", workload="mahjong", size="tiny", target=target,
        batch_size=batch_size, status=status, feed="device",
        samples_per_s=value if measured else None,
        samples_per_s_min=value * 0.9 if measured else None, samples_per_s_max=value * 1.05 if measured else None,
        step_time_s=batch_size / value if measured else None, first_step_s=0.5 + batch_size / 1000,
        compiles_in_windows=1 if status == "invalid" else 0,
        peak_memory_bytes=batch_size * 2**20 if measured else None,
        mfu=0.25 if measured else None, peak_tflops=1.0, peak_tflops_source="measured",
        error="CUDA out of memory" if status == "oom" else ("boom" if status == "error" else None),
        **ENVIRONMENT,
    )
    return {**dataclasses.asdict(row), "command": BENCH_COMMAND, **fields}


def bench_rows() -> list[dict]:
    return [
        bench("cpu:eager:fp32", 64), bench("cpu:eager:fp32", 128), bench("cpu:eager:fp32", 256),
        bench("cpu:compile:fp32", 64, samples_per_s=2100.0, lrelu_path="plain"),
        bench("cpu:compile:fp32", 128, status="invalid", samples_per_s=INVALID_SAMPLES_PER_S),
        bench("cpu:compile:fp32", 256, status="oom"),
        bench("cpu:compile:fp32", 512, status="skipped"),
        bench("cpu:eager:bf16", 64, status="error"),
    ]


def remote_rows() -> list[dict]:
    remote = "remote:127.0.0.1:7000/cpu:eager:fp32"
    link = dict(transport="grpc", link="loopback", in_flight=1, bytes_sent_per_step=2_000_000,
                bytes_received_per_step=64)
    return [
        bench(remote, 64, samples_per_s=300.0, server_step_s=0.05, **link),
        bench(remote, 128, samples_per_s=500.0, server_step_s=0.1, **link),
    ]


def eval_row(policy: str, step: int, mean_rank: float) -> dict:
    return {
        "kind": "mahjong-eval", "timestamp": "2026-01-01T00:00:00", "policy": f"runs/{policy}", "policy_size": "tiny",
        "policy_step": step, "opponent": "rule-based", "games": 400, "deals": 100, "seed": 0,
        "target": "cpu:eager:fp32", "temperature": 0.0, "mean_rank": mean_rank,
        "mean_rank_ci95": [mean_rank - 0.1, mean_rank + 0.1], "mean_score_delta": -1200.0,
        "mean_score_delta_ci95": [-2500.0, 100.0], "rank_distribution": [0.2, 0.25, 0.25, 0.3],
        "games_per_s": 3.5, "decisions_per_s": 900.0, "threads": 2, "torch_version": "2.9.0+cpu",
        "command": f"trainspeed eval mahjong --policy runs/{policy} --opponent rule-based --games 400",
        "deal_ranks": [[1, 2, 3, 4]],
    }


def study_rows() -> list[dict]:
    rows = []
    for batch, loss in ((256, 1.30), (2048, 1.35)):
        for seed in (0, 1):
            rows.append({
                "kind": "batch-size-study", "global_batch": batch, "lr": 1e-3 * (batch / 256) ** 0.5, "seed": seed,
                "samples": 65536, "steps": 65536 // batch, "val_loss": loss + seed / 100, "val_accuracy": 0.55 - seed / 100,
                "equal_steps": 32, "equal_steps_val_loss": loss + 0.1, "equal_steps_val_accuracy": 0.5,
                "wall_s": 600.0 / (1 + batch / 1024), "mean_rank": 2.45 + seed / 50, "mean_rank_ci95": [2.35, 2.55 + seed / 50],
                "command": "python benchmarks/batch_size_study.py --data data/selfplay --batches 256,2048",
            })
    return rows


def summary(world_size: int, samples_per_s: float, synthetic: bool = False) -> dict:
    return dataclasses.asdict(RunSummary(
        workload="mahjong", size="tiny", target="cpu:eager:fp32", world_size=world_size, batch_size_per_device=512,
        global_batch=512 * world_size, synthetic_data=synthetic, num_workers=1, threads=1, first_step=0, last_step=20,
        samples=20 * 512 * world_size, wall_s=20 * 512 * world_size / samples_per_s, paused_s=0.5,
        end_to_end_samples_per_s=samples_per_s, steady_samples_per_s=samples_per_s * 1.02,
        samples_per_s_per_device=samples_per_s / world_size, step_time_s=0.4, data_wait_fraction=0.02 * world_size,
        data_wait_fraction_worst_rank=0.03 * world_size, steady_data_wait_fraction=0.01, h2d_s_per_step=0.0,
        final_loss=1.3, validation={"loss": 1.31, "accuracy": 0.56, "majority_baseline": 0.19},
        bench_samples_per_s=None, io_efficiency=None, stopped_by_signal=False, torch_version="2.9.0+cpu",
    ))


def write_run(directory: Path, world_size: int, samples_per_s: float) -> Path:
    directory.mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps(summary(world_size, samples_per_s), indent=2))
    metrics = [{"kind": "train", "step": step, "loss": 2.0 - step / 20, "samples_per_s": samples_per_s,
                "data_wait_fraction": 0.01} for step in range(5, 21, 5)]
    metrics += [{"kind": "val", "step": step, "loss": 1.5 - step / 100, "accuracy": 0.4 + step / 100} for step in (10, 20)]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in metrics))
    return directory


OLD_STYLEGAN3_ROW = {
    "size": "tiny-t", "resolution": 32, "batch_size": 4, "variant": "activation", "target": "cpu:eager:fp32",
    "device_name": "Test CPU (2 threads)", "threads": 2, "first_step_s": 0.45, "step_s": 0.355,
    "step_s_range": [0.348, 0.361], "timed_steps": 2, "images_per_s": 11.2797, "s_per_kimg": 88.7,
    "flops_per_image": 1693500504.0, "achieved_tflops": 0.0191, "peak_host_rss_gib": 0.991,
    "host_rss_before_step_gib": 0.799, "peak_device_memory_gib": 1.5, "generator_parameters": 79751,
    "discriminator_parameters": 288993, "load_average_1min": 0.62, "torch_version": "2.9.0+cpu",
    "timestamp": "2026-01-01T00:38:20Z", "lrelu_path": "plain",
}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_every_kind(folder: Path) -> list[Path]:
    """One input of every kind: bench, remote, old StyleGAN3, evaluation and study rows, and two run
    directories (one and two ranks)."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_jsonl(folder / "bench.jsonl", bench_rows()),
        write_jsonl(folder / "remote.jsonl", remote_rows()),
        write_jsonl(folder / "stylegan3_old.jsonl", [OLD_STYLEGAN3_ROW]),
        write_jsonl(folder / "eval.jsonl", [eval_row("b256", 128, 2.42), eval_row("b2048", 16, 2.58)]),
        write_jsonl(folder / "study.jsonl", study_rows()),
        write_run(folder / "runs" / "one", 1, 1000.0),
        write_run(folder / "runs" / "two", 2, 1800.0),
    ]
