"""Readers for result files written before their scripts wrote trainspeed's row schemas.

- `benchmarks/bench_stylegan3.py` wrote rows of its own shape (images/s, memory in GiB, no
  `workload`); `docs/results/stylegan3_*.jsonl` hold such rows. They become bench rows here, with
  the fields bench_stylegan3.py writes today.
- `benchmarks/bench_train_scaling.py` wrote one row per training run with a few summary fields
  and `nproc`/`data`; the target it ran (always `cpu:eager:fp32`) and the workload (always
  `mahjong`) were not written, so they are filled in here.
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
STYLEGAN3_RENAMED = {
    "images_per_s", "step_s", "step_s_range", "timed_steps", "flops_per_image", "peak_device_memory_gib",
    "peak_host_rss_gib", "host_rss_before_step_gib",
}
SCALING_TARGET = "cpu:eager:fp32"
"""The one target bench_train_scaling.py runs."""


def is_old_stylegan3(record: dict[str, Any]) -> bool:
    return "workload" not in record and all(name in record for name in ("images_per_s", "step_s", "batch_size", "target"))


def stylegan3_record(record: dict[str, Any], source: object) -> dict[str, Any]:
    """An old bench_stylegan3.py row as the row the script writes today (ResultRow fields + extras)."""
    batch = int(record["batch_size"])
    fastest, slowest = (record.get("step_s_range") or [record["step_s"], record["step_s"]])[:2]
    device_gib = record.get("peak_device_memory_gib")
    row = {k: v for k, v in record.items() if k not in STYLEGAN3_RENAMED}
    row.update(
        run_id=str(record.get("timestamp", "")),
        timestamp=str(record.get("timestamp", "")),
        workload="stylegan3",
        status="ok",
        feed="device",
        samples_per_s=record["images_per_s"],
        samples_per_s_min=batch / slowest if slowest else None,
        samples_per_s_max=batch / fastest if fastest else None,
        step_time_s=record["step_s"],
        windows=record.get("timed_steps"),
        steps_per_window=1,
        peak_memory_bytes=round(device_gib * GIB) if device_gib is not None else None,
        flops_per_sample=record.get("flops_per_image"),
        peak_host_rss_bytes=round(record["peak_host_rss_gib"] * GIB) if record.get("peak_host_rss_gib") is not None else None,
        host_rss_before_step_bytes=(round(record["host_rss_before_step_gib"] * GIB)
                                    if record.get("host_rss_before_step_gib") is not None else None),
        row_format=f"bench_stylegan3.py before bench rows (read from {source})",
    )
    return row


def is_old_scaling(record: dict[str, Any]) -> bool:
    return all(name in record for name in ("nproc", "data", "steady_samples_per_s", "batch_size_per_device", "size"))


def scaling_summary(record: dict[str, Any]) -> dict[str, Any]:
    """An old bench_train_scaling.py row as a run summary (the fields it has, the rest None)."""
    nproc = int(record["nproc"])
    batch = int(record["batch_size_per_device"])
    summary = dict(record)
    summary.update(
        workload=record.get("workload", "mahjong"),
        target=record.get("target", SCALING_TARGET),
        world_size=nproc,
        global_batch=nproc * batch,
        synthetic_data=record["data"] == "synthetic",
        num_workers=record.get("loader_workers_per_rank"),
        threads=record.get("threads_per_rank"),
    )
    return summary
