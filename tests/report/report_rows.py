"""Result rows of every kind the report reads, made with their writers' dataclasses and written
into a test's folder. (Run directories are never made by hand: see conftest.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from trainspeed.bench.measurement import MeasurementRow
from trainspeed.bench.results import ResultRow
from trainspeed.evaluate.power import plan_power
from trainspeed.evaluate.rows import MahjongEvalRow
from trainspeed.machine import Machine
from trainspeed.rows import row_record
from trainspeed.studies.batch_size.config import BatchSizeConfig
from trainspeed.studies.batch_size.rows import (
    BatchSizeBatchRow,
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
    BatchSizeStrengthRow,
)
from trainspeed.studies.scaling.rows import ScalingRunRow

INVALID_SAMPLES_PER_S = 98765.4321
"""The samples/s of the invalid row: a number that must never appear on the page."""
BENCH_COMMAND = "trainspeed bench --workload mahjong --size tiny --targets cpu:eager:fp32,cpu:compile:fp32 --out b.jsonl"
MACHINE = Machine(hostname="testhost", cpu_model="Test CPU", cores_total=4, cores_usable=2, load_average_start=1.25,
                  load_average_end=1.5, torch_threads=2, torch_interop_threads=2, python_version="3.11.7",
                  torch_version="2.9.0+cpu", torch_xla_version=None, thread_variables={"OMP_NUM_THREADS": "2"})
BUSY = dataclasses.replace(MACHINE, load_average_start=3.5, load_average_end=4.0)
"""The same machine with more load than its 2 usable cores: a shared machine."""
SHA = "ab" * 32


def bench(target: str, batch_size: int, status: str = "ok", samples_per_s: float | None = None, run_id: str = "r1",
          **fields: Any) -> dict:
    measured = status in ("ok", "invalid")
    value = samples_per_s if samples_per_s is not None else 1000.0 + batch_size
    known = {name: fields.pop(name) for name in list(fields) if name in ResultRow.__dataclass_fields__}
    row = ResultRow(**{
        **dict(run_id=run_id, timestamp="2026-01-01T00:00:00+00:00", workload="mahjong", size="tiny", target=target,
               batch_size=batch_size, status=status, feed="device", workload_module="trainspeed.workloads.mahjong.workload",
               workload_sha256=SHA,
               samples_per_s=value if measured else None,
               samples_per_s_min=value * 0.9 if measured else None, samples_per_s_max=value * 1.05 if measured else None,
               step_time_s=batch_size / value if measured else None, first_step_s=0.5 + batch_size / 1000,
               compiles_in_windows=1 if status == "invalid" else 0,
               peak_memory_bytes=batch_size * 2**20 if measured else None, cpu_s_per_wall_s=1.0 if measured else None,
               mfu=0.25 if measured else None, peak_tflops=1.0, peak_tflops_source="measured",
               error="CUDA out of memory" if status == "oom" else ("boom" if status == "error" else None),
               device_name="Test CPU (2 threads)", machine=MACHINE, command=BENCH_COMMAND),
        **known})
    return row_record(row, fields)


def bench_rows() -> list[dict]:
    return [
        bench("cpu:eager:fp32", 64), bench("cpu:eager:fp32", 128), bench("cpu:eager:fp32", 256),
        bench("cpu:compile:fp32", 64, samples_per_s=2100.0, lrelu_path="plain"),
        bench("cpu:compile:fp32", 128, status="invalid", samples_per_s=INVALID_SAMPLES_PER_S),
        bench("cpu:compile:fp32", 256, status="oom"),
        bench("cpu:compile:fp32", 512, status="skipped"),
        bench("cpu:eager:bf16", 64, status="error"),
    ]


REMOTE = "remote:127.0.0.1:7000/cpu:eager:fp32/link=loopback"


def remote_rows() -> list[dict]:
    link = dict(transport="grpc", link="loopback", in_flight=1, bytes_sent_per_step=2_000_000,
                bytes_received_per_step=64, feed="host")
    return [
        bench("cpu:eager:fp32", 64, samples_per_s=900.0, run_id="side-by-side", feed="host"),
        bench(REMOTE, 64, samples_per_s=300.0, server_step_s=0.05, run_id="side-by-side", **link),
        bench("cpu:eager:fp32", 128, samples_per_s=1000.0, run_id="side-by-side-128", feed="host"),
        bench(REMOTE, 128, samples_per_s=500.0, server_step_s=0.5, run_id="side-by-side-128", **link),
    ]


def eval_row(policy: str, step: int, mean_rank: float) -> dict:
    return row_record(MahjongEvalRow(
        timestamp="2026-01-01T00:00:00", policy=f"runs/{policy}", policy_size="tiny", policy_step=step,
        opponent="rule-based", games=400, deals=100, eval_seed=0, policy_seed=0, policy_samples=step * 256,
        opponent_seed=None, target="cpu:eager:fp32", temperature=0.0,
        mean_rank=mean_rank, mean_rank_ci95=[mean_rank - 0.1, mean_rank + 0.1], mean_score_delta=-1200.0,
        mean_score_delta_ci95=[-2500.0, 100.0], rank_distribution=[0.2, 0.25, 0.25, 0.3], games_per_s=3.5,
        decisions_per_s=900.0, engine_s=10.0, network_s=5.0, threads=2, torch_version="2.9.0+cpu",
        command=f"trainspeed eval mahjong --policy runs/{policy} --opponent rule-based --games 400",
        mean_rank_ci95_half_width=0.1, within_deal_correlation=-1 / 3, eval_id=f"e-{policy}", policy_checkpoint=f"runs/{policy}/step.pt",
        opponent_size=None, opponent_step=None, deal_seeds="deal_seed(0, d) for d in 0..99", games_played=400,
        wall_s=100.0, encode_s=1.0, decisions=9000, forward_calls=300, batch_games=64, workers=1, device="Test CPU",
        engine="riichienv test", deal_ranks=[[1, 2, 3, 4]] * 100, deal_score_deltas=[[0, 0, 0, 0]] * 100,
        cpu_s_per_wall_s=1.0, machine=MACHINE))


STUDY = "batch-size-test"


def batch_size_rows() -> list[dict]:
    config = BatchSizeConfig(data="d", out="o", batches=(256, 2048), samples=65536, seeds=(0, 1), lr_factors=(1.0,),
                             checkpoints=8)
    rows: list[Any] = [BatchSizeSettingsRow(
        study_id=STUDY, settings=config, equal_steps=32, power=plan_power(2, 150),
        samples_per_s={"256": 1200.0, "2048": 1500.0}, throughput_run_id="r1",
        command="trainspeed study batch-size --out o", train_s=100.0, eval_s=80.0, total_s=200.0, machine=MACHINE)]
    for batch, loss in ((256, 1.30), (2048, 1.35)):
        for seed in (0, 1):
            rows.append(BatchSizeRunRow(
                study_id=STUDY, run=f"b{batch}-s{seed}", run_dir=f"o/runs/b{batch}-s{seed}", global_batch=batch, nproc=1,
                batch_size_per_device=batch, lr_factor=1.0, peak_lr=1e-3, train_seed=seed, steps=65536 // batch,
                warmup_steps=4, samples=65536, checkpoint_every=max(1, 65536 // batch // 8), val_loss=loss + seed / 100,
                val_accuracy=0.55 - seed / 100, majority_baseline=0.2, val_samples=1000.0, equal_steps=32,
                equal_steps_samples=32 * batch, equal_steps_val_loss=loss + 0.1, equal_steps_val_accuracy=0.5,
                curve=[[8192.0, loss, 0.5]], train_wall_s=600.0 / (1 + batch / 1024), end_to_end_samples_per_s=1000.0,
                command="trainspeed train ...", machine=MACHINE))
        rows.append(BatchSizeBatchRow(
            study_id=STUDY, global_batch=batch, best_lr_factor=1.0, peak_lr=1e-3, steps=65536 // batch, seeds=[0, 1],
            lr_sweep={"1": loss}, val_loss=loss, val_loss_per_seed=[loss, loss], val_accuracy=0.55,
            val_accuracy_per_seed=[0.55, 0.55], majority_baseline=0.2, equal_steps_val_loss=loss + 0.1,
            equal_steps_val_accuracy=0.5, train_wall_s=300.0))
        for framing, step in (("equal samples", 65536 // batch), ("equal steps", 32), ("equal wall time", 65536 // batch)):
            rows.append(BatchSizeStrengthRow(
                study_id=STUDY, framing=framing, global_batch=batch, samples=step * batch, step=step, seeds=[0, 1],
                games_per_seed=600, mean_rank=2.46, mean_rank_ci95=[2.4, 2.52], mean_rank_per_seed=[2.45, 2.47],
                seed_sd=0.014, within_deal_correlation=[0.2, 0.18], eval_ids=["e1", "e2"]))
    for framing in ("equal samples", "equal steps", "equal wall time", "head to head"):
        rows.append(BatchSizeComparisonRow(
            study_id=STUDY, framing=framing, global_batch=2048, versus_batch=256, mean_rank_difference=-0.02,
            ci95=[-0.08, 0.04], minimum_detectable_difference=0.085, seeds=2, deals=150,
            verdict="inconclusive at a minimum detectable difference of 0.085 ranks"))
    return [row_record(row) for row in rows]


def scaling_rows(study: str = "scaling-test") -> list[dict]:
    rows = []
    for world, rate in ((1, 1000.0), (2, 1700.0)):
        for data in ("real", "synthetic"):
            rows.append(row_record(ScalingRunRow(
                study_id=study, repeat=0, data=data, workload="mahjong", size="tiny", target="cpu:eager:fp32",
                world_size=world, batch_size_per_device=256, steps=30, threads_per_rank=1, loader_workers_per_rank=1,
                steady_samples_per_s=rate * 1.02, end_to_end_samples_per_s=rate if data == "real" else rate * 1.05,
                samples_per_s_per_device=rate / world if data == "real" else rate * 1.05 / world,
                data_wait_fraction=0.02, data_wait_fraction_worst_rank=0.03, steady_data_wait_fraction=0.01,
                step_time_s=0.25, h2d_s_per_step=0.0, bench_samples_per_s=1100.0, workload_sha256=SHA,
                machine=MACHINE, cpu_s_per_wall_s=1.0, command="trainspeed study scaling --out o")))
    return rows


def measurement_rows() -> list[dict]:
    return [row_record(MeasurementRow.of("loader", {"num_workers": workers, "samples_per_s": 1e5 * (workers + 1),
                                                     "samples_per_s_spread": [9e4, 1.1e5]},
                                         "python benchmarks/bench_loader.py", MACHINE)) for workers in (0, 1)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def agreement_row(step: int, discard: float) -> dict:
    from trainspeed.evaluate.rows import MahjongAgreementRow
    from trainspeed.workloads.mahjong.decisions import DECISION_KINDS, DISCARD_ERRORS

    agreement = {kind: 1.0 for kind in DECISION_KINDS} | {"discard": discard, "overall": 0.9,
                                                           "discard_building": discard, "discard_folding": 0.8}
    return row_record(MahjongAgreementRow(
        timestamp="2026-01-01T00:00:00", policy="runs/tiny", policy_size="tiny", policy_step=step, data="data/sp",
        split="val", samples=1000, agreement=agreement, samples_per_kind=dict.fromkeys(DECISION_KINDS, 125),
        discard_errors=dict.fromkeys(DISCARD_ERRORS, 3), folding_samples=20,
        chosen_kinds={kind: dict.fromkeys(DECISION_KINDS, 0) for kind in DECISION_KINDS}, target="cpu:eager:fp32",
        threads=1, wall_s=3.0, command="trainspeed eval mahjong-agreement --policy runs/tiny", machine=MACHINE))


def null_test_row() -> dict:
    from trainspeed.evaluate.rows import NullTestRow

    return row_record(NullTestRow(
        timestamp="2026-01-01T00:00:00", policy="runs/tiny", policy_step=3000, temperature=1.0, games_per_seed=80,
        eval_seeds=list(range(20)), covered=19, coverage=0.95, coverage_ci95=[0.76, 0.99],
        mean_ranks=[2.5] * 20, within_deal_correlations=[0.0] * 20, eval_ids=[f"e{i}" for i in range(20)],
        command="trainspeed eval mahjong-null --policy runs/tiny", machine=MACHINE))


def write_every_kind(folder: Path) -> list[Path]:
    """One result file of every kind a results file holds (run directories come from real runs)."""
    folder.mkdir(parents=True, exist_ok=True)
    return [
        write_jsonl(folder / "bench.jsonl", bench_rows()),
        write_jsonl(folder / "remote.jsonl", remote_rows()),
        write_jsonl(folder / "eval.jsonl", [eval_row("b256", 128, 2.42), eval_row("b2048", 16, 2.58),
                                            eval_row("b256", 512, 2.40)]),
        write_jsonl(folder / "agreement.jsonl", [agreement_row(500, 0.8), agreement_row(3000, 0.97), null_test_row()]),
        write_jsonl(folder / "batch_size.jsonl", batch_size_rows()),
        write_jsonl(folder / "scaling.jsonl", scaling_rows()),
        write_jsonl(folder / "measurements.jsonl", measurement_rows()),
    ]
