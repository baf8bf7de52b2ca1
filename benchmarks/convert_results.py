"""Rewrite result files of earlier trainspeed versions in today's row schema, values unchanged.

    python benchmarks/convert_results.py FILE... [--note TEXT]

Rows written before rows carried `kind` and `schema_version` are recognised by their fields and
become the row type their writer defines today; a row that already has a kind is kept as it is.
What changes, per kind of old row:

- bench rows: `kind: bench`; `hostname`, `python_version`, `torch_version`, `torch_xla_version`
  and `threads` move into `machine` (cores and load were not recorded: None, and `--note` says
  what is known of the machine). Rows of a reference peer (`reference-*` targets) measured right
  after a trainspeed bench row of the same batch size join that row's run (their own invocation
  id is kept as `invocation_run_id`), as `--run-id` makes them today.
- old StyleGAN3 rows (images/s, memory in GiB): bench rows with windows of one step; the memory
  trade-off `variant` becomes the size's switch (`tiny-t+recompute-none`), the GiB fields bytes.
  A row of the first step alone (`--steps 0`) has no timed window: `skipped`, its first step kept.
- old scaling rows (`nproc`, `data`) and CUDA training rows (`io_efficiency_vs_synthetic`):
  `scaling-run` rows, one per training run; their study is their run id or file.
- a quality document (`{summary, validation}`): a run directory beside it (`summary.json` and
  the validation rows of `metrics.jsonl`); the summary's `validation` is its last validation row.
- `mahjong-eval` rows (also of version 1): version 2; the one `seed` becomes `eval_seed`, read
  from `deal_seeds` (the first batch-size study wrote the training seed into `seed`, which becomes
  `policy_seed`); the within-deal correlation is computed from the deals' ranks.
- `mahjong-agreement` rows written before versions: version 1; the machine was not recorded
  (`--note` says what is known of it), nor the workload's identity.
- the first batch-size study's `batch-study-*` and `batch-size-*` rows do not convert: that study
  pooled its seeds differently and had no power plan or framings; rerun `trainspeed study batch-size`.
- loader (and its `check-cost`), agent, harness-overhead and saved-memory rows: `measurement`
  rows of their script.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.rows import KIND, VERSION, read_records  # noqa: E402

GIB = 2**30
MACHINE_FIELDS = ("hostname", "python_version", "torch_version", "torch_xla_version", "threads")
STYLEGAN3_SWITCHES = {"activation": "", "none": "+recompute-none", "layer": "+recompute-layer", "grouped": "+grouped",
                      "matmul": "+fir-matmul"}
STYLEGAN3_RENAMED = {"images_per_s", "step_s", "step_s_range", "timed_steps", "flops_per_image", "peak_device_memory_gib",
                     "peak_host_rss_gib", "host_rss_before_step_gib", "load_average_1min", "threads", "torch_version",
                     "timestamp"}
SCALING_TARGET = "cpu:eager:fp32"
"""The one target the old scaling script ran (its rows did not say)."""


def machine(note: str | None, **recorded: Any) -> dict[str, Any]:
    fields = dict(hostname=None, cpu_model=None, cores_total=None, cores_usable=None, load_average_start=None,
                  load_average_end=None, torch_threads=None, torch_interop_threads=None, python_version=None,
                  torch_version=None, torch_xla_version=None, thread_variables={}, note=note)
    fields.update(recorded)
    return fields


def tagged(kind: str, **fields: Any) -> dict[str, Any]:
    return {KIND: kind, VERSION: 1, **fields}


def bench(record: dict[str, Any], note: str | None) -> dict[str, Any]:
    row = {k: v for k, v in record.items() if k not in MACHINE_FIELDS}
    row["machine"] = machine(note, hostname=record.get("hostname"), python_version=record.get("python_version"),
                             torch_version=record.get("torch_version"),
                             torch_xla_version=record.get("torch_xla_version"), torch_threads=record.get("threads"))
    return tagged("bench", **row)


def stylegan3(record: dict[str, Any], note: str | None) -> dict[str, Any]:
    batch = int(record["batch_size"])
    fastest, slowest = (record.get("step_s_range") or [record["step_s"], record["step_s"]])[:2]

    def as_bytes(name: str) -> int | None:
        return round(record[name] * GIB) if record.get(name) is not None else None

    extras = {k: v for k, v in record.items() if k not in STYLEGAN3_RENAMED and k not in ("size", "batch_size",
                                                                                            "target", "device_name",
                                                                                            "first_step_s",
                                                                                            "achieved_tflops")}
    stamp = str(record.get("timestamp", ""))
    if not record.get("timed_steps"):  # `--steps 0`: the first step alone, R1 and any compilation in it
        return tagged(
            "bench", run_id=stamp, timestamp=stamp, workload="stylegan3",
            size=record["size"] + STYLEGAN3_SWITCHES.get(record.get("variant", "activation"), ""),
            target=record["target"], batch_size=batch, status="skipped", feed="device",
            first_step_s=record.get("first_step_s"), flops_per_sample=record.get("flops_per_image"),
            device_name=record.get("device_name"),
            error=f"the first step alone (--steps 0, {record['step_s']} s with R1): no timed window",
            machine=machine(note, torch_threads=record.get("threads"), torch_version=record.get("torch_version"),
                            load_average_end=record.get("load_average_1min")),
            **extras, first_step_images_per_s=record["images_per_s"], peak_host_rss_bytes=as_bytes("peak_host_rss_gib"),
            host_rss_before_step_bytes=as_bytes("host_rss_before_step_gib"))
    return tagged(
        "bench", run_id=stamp, timestamp=stamp, workload="stylegan3",
        size=record["size"] + STYLEGAN3_SWITCHES.get(record.get("variant", "activation"), ""),
        target=record["target"], batch_size=batch, status="ok", feed="device",
        samples_per_s=record["images_per_s"], samples_per_s_min=batch / slowest if slowest else None,
        samples_per_s_max=batch / fastest if fastest else None, step_time_s=record["step_s"],
        first_step_s=record.get("first_step_s"), windows=record.get("timed_steps"), steps_per_window=1,
        peak_memory_bytes=as_bytes("peak_device_memory_gib"), flops_per_sample=record.get("flops_per_image"),
        achieved_tflops=record.get("achieved_tflops"), device_name=record.get("device_name"),
        machine=machine(note, torch_threads=record.get("threads"), torch_version=record.get("torch_version"),
                        load_average_end=record.get("load_average_1min")),
        **extras, peak_host_rss_bytes=as_bytes("peak_host_rss_gib"),
        host_rss_before_step_bytes=as_bytes("host_rss_before_step_gib"),
    )


def scaling(record: dict[str, Any], note: str | None) -> dict[str, Any]:
    return tagged(
        "scaling-run", study_id=record["run_id"], repeat=record["repeat"], data=record["data"],
        workload=record.get("workload", "mahjong"), size=record["size"], target=record.get("target", SCALING_TARGET),
        world_size=record["nproc"], batch_size_per_device=record["batch_size_per_device"], steps=record["steps"],
        threads_per_rank=record["threads_per_rank"], loader_workers_per_rank=record["loader_workers_per_rank"],
        steady_samples_per_s=record["steady_samples_per_s"], end_to_end_samples_per_s=record["end_to_end_samples_per_s"],
        samples_per_s_per_device=record["samples_per_s_per_device"], data_wait_fraction=record["data_wait_fraction"],
        data_wait_fraction_worst_rank=record["data_wait_fraction_worst_rank"],
        steady_data_wait_fraction=record["steady_data_wait_fraction"], step_time_s=record["step_time_s"],
        h2d_s_per_step=None, bench_samples_per_s=record["bench_samples_per_s"], machine=machine(note),
    )


def cuda_training(record: dict[str, Any], study: str, note: str | None) -> list[dict[str, Any]]:
    """One row per batch size of the old CUDA script: its real-data and its synthetic-data run."""
    common = dict(study_id=study, repeat=0, workload="mahjong", size=record["size"], target=record["target"],
                  world_size=1, batch_size_per_device=record["batch_size"], steps=record["steps"], threads_per_rank=4,
                  loader_workers_per_rank=record["num_workers"], step_time_s=None,
                  bench_samples_per_s=record["bench_samples_per_s"], machine=machine(note))
    real = tagged("scaling-run", data="real", **common, steady_samples_per_s=record["real_samples_per_s"],
                  end_to_end_samples_per_s=record["real_end_to_end_samples_per_s"],
                  samples_per_s_per_device=record["real_samples_per_s"], data_wait_fraction=record["data_wait_fraction"],
                  data_wait_fraction_worst_rank=record["data_wait_fraction"],
                  steady_data_wait_fraction=record.get("steady_data_wait_fraction"),
                  h2d_s_per_step=record["h2d_s_per_step"])
    synthetic = tagged("scaling-run", data="synthetic", **common, steady_samples_per_s=record["synthetic_samples_per_s"],
                       end_to_end_samples_per_s=None, samples_per_s_per_device=record["synthetic_samples_per_s"],
                       data_wait_fraction=None, data_wait_fraction_worst_rank=None, steady_data_wait_fraction=None,
                       h2d_s_per_step=None)
    return [real, synthetic]


def quality(document: dict[str, Any], path: Path, note: str | None) -> Path:
    """A run directory (summary.json, metrics.jsonl of the validation rows) beside `path`."""
    old = document["summary"]
    validation = [{KIND: "val", VERSION: 1, **{k: v for k, v in row.items() if k != KIND}}
                  for row in document["validation"]]
    last = {k: v for k, v in document["validation"][-1].items() if k not in (KIND, "step")}
    summary = {k: v for k, v in old.items() if k not in ("val_accuracy", "majority_baseline", "val_samples")}
    summary.update(paused_s=None, steady_data_wait_fraction=None, validation=last, machine=machine(note))
    directory = path.with_suffix("")
    atomic_write_text(directory / "summary.json", json.dumps({KIND: "train-summary", VERSION: 1, **summary},
                                                             indent=2, sort_keys=True) + "\n")
    atomic_write_text(directory / "metrics.jsonl", "".join(json.dumps(row, sort_keys=True) + "\n" for row in validation))
    return directory


def measurement(benchmark: str, values: dict[str, Any], note: str | None, command: str | None = None,
                **recorded: Any) -> dict[str, Any]:
    return tagged("measurement", benchmark=benchmark, values=values, command=command, timestamp=None,
                  machine=machine(note, **recorded))


DEAL_SEEDS = re.compile(r"deal_seed\((\d+), d\)")


def evaluation(record: dict[str, Any], note: str | None) -> dict[str, Any]:
    """A `mahjong-eval` row of version 2 from one written before versions (or of version 1): its one
    `seed` was the evaluation's (the old batch-size study overwrote it with the training seed, so it is
    read back from the deal seeds), the training seeds and samples were not recorded."""
    from trainspeed.stats import within_cluster_correlation

    row = {k: v for k, v in record.items() if k not in ("study_run", "global_batch", "lr_factor", "seed", VERSION)}
    row["eval_seed"] = int(DEAL_SEEDS.match(record["deal_seeds"]).group(1))
    row.setdefault("policy_seed", record["seed"] if "study_run" in record else None)
    row.setdefault("opponent_seed", None)
    row.setdefault("policy_samples", None)
    row.setdefault("within_deal_correlation", within_cluster_correlation(record["deal_ranks"]))
    row.setdefault("workers", 1)
    row.setdefault("machine", machine(note, torch_threads=record.get("threads"), torch_version=record.get("torch_version")))
    return {**row, VERSION: 2}


def agreement(record: dict[str, Any], note: str | None) -> dict[str, Any]:
    """A `mahjong-agreement` row of version 1 from one written before versions, values unchanged."""
    row = dict(record)
    row.setdefault("machine", machine(note, torch_threads=record.get("threads")))
    return {**row, VERSION: 1}


def join_peer_runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reference peer's row joins the run of the trainspeed bench row of its batch just before it."""
    last: dict[int, str] = {}
    joined = []
    for row in rows:
        if row.get(KIND) == "bench" and row["target"].startswith("reference-") and row["batch_size"] in last:
            row = {**row, "run_id": last[row["batch_size"]], "invocation_run_id": row["run_id"]}
        elif row.get(KIND) == "bench":
            last[row["batch_size"]] = row["run_id"]
        joined.append(row)
    return joined


def convert_record(record: dict[str, Any], path: Path, note: str | None) -> list[dict[str, Any]]:
    if record.get(KIND) == "mahjong-eval" and record.get(VERSION, 1) == 1:
        return [evaluation(record, note)]
    if VERSION in record:
        return [record]
    if record.get(KIND) == "mahjong-agreement":
        return [agreement(record, note)]
    if record.get(KIND) == "mahjong-eval":
        return [evaluation(record, note)]
    if all(name in record for name in ("workload", "target", "batch_size", "status")):
        return [bench(record, note)]
    if all(name in record for name in ("images_per_s", "step_s", "batch_size", "target")):
        return [stylegan3(record, note)]
    if all(name in record for name in ("nproc", "data", "steady_samples_per_s")):
        return [scaling(record, note)]
    if "io_efficiency_vs_synthetic" in record:
        return cuda_training(record, path.stem, note)
    if record.get(KIND) == "check-cost":
        return [measurement("loader-check-cost", {k: v for k, v in record.items() if k != KIND}, note)]
    if "samples_per_epoch" in record:
        return [measurement("loader", record, note, cores_total=record.get("cpu_count"))]
    if "match" in record:
        return [measurement("agents", record, note)]
    if "g_main_saved_gib" in record:
        return [measurement("stylegan3-saved-memory", record, "counted on meta tensors: no device, nothing timed")]
    if "bench_over_loop_median_of_pairs" in record:
        values = {k: v for k, v in record.items() if k not in ("command", "threads", "torch_version")}
        return [measurement("harness-overhead", values, note, command=record.get("command"),
                            torch_threads=record.get("threads"), torch_version=record.get("torch_version"))]
    raise SystemExit(f"{path}: a row this script does not know: {sorted(record)[:8]}")


def convert(path: Path, note: str | None) -> list[Path]:
    """Rewrite `path` (or, for a quality document, write its run directory); the paths written."""
    records = [record for record, _ in read_records(path)]
    if len(records) == 1 and isinstance(records[0], dict) and "summary" in records[0] and "validation" in records[0]:
        return [quality(records[0], path, note)]
    if any(isinstance(r, dict) and str(r.get(KIND, "")).startswith(("batch-study-", "batch-size-")) for r in records):
        raise SystemExit(f"{path}: rows of the batch-size study's first method (one seed's LR sweep pooled "
                         "per batch, no power plan, no framings): they do not convert; rerun `trainspeed study batch-size`")
    rows = [row for record in records for row in convert_record(record, path, note)]
    atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in join_peer_runs(rows)))
    return [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--note", default=None, help="what is known of the machine the rows ran on")
    args = parser.parse_args(argv)
    for path in args.files:
        for written in convert(path, args.note):
            print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
