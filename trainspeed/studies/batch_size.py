"""Finding 4: does a larger global batch give a stronger Mahjong policy? The batch-size study.

The study trainspeed follows reports that training at global batch 8192 (8 devices x 1024) made
the policy play clearly better in self-play. This study tests that on one fixed self-play data
set: the same model size and the same number of samples seen at every global batch, the learning
rate tuned per batch (several values around the square-root-scaled one), a warm-up fixed in
samples, several seeds. For each batch it records validation loss and accuracy at equal samples
(the end of every run) and at equal steps (the step where the largest batch ends), the wall time,
and the playing strength of the best learning rate's policies against three rule-based agents in
duplicate games (`trainspeed eval mahjong`), with 95% intervals clustered by deal, and the
difference to the largest batch deal by deal.

Every training is `trainspeed train` (ranks x per-device batch = the global batch, `--lr` and
`--lr-scaling sqrt`), every evaluation `trainspeed eval mahjong`; a rerun skips finished runs and
evaluations. Writes OUT/batch_size.jsonl: the study's settings, one row per run, the evaluation
rows, one row per global batch and the comparisons with their verdict (appended: a rerun adds its
rows under a study id of its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from trainspeed.bench.environment import Machine
from trainspeed.errors import UsageError
from trainspeed.evaluate.mahjong import MahjongEvalRow, read_eval_rows
from trainspeed.evaluate.stats import clustered_mean
from trainspeed.rows import append_row, read_records
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    StudyFailed,
    no_progress,
    non_negative_ints,
    positive_floats,
    positive_ints,
    run_trainspeed,
    shown,
)
from trainspeed.train.evaluation import EvalRecord
from trainspeed.train.metrics import METRICS_FILE
from trainspeed.train.summary import SUMMARY_FILE, RunSummary, read_summary

NAME = "batch-size"
HELP = "finding 4: does a larger global batch train a stronger policy (equal samples, LR tuned per batch)"
ROWS_FILE = "batch_size.jsonl"
VERDICTS = ("supported", "contradicted", "inconclusive")


@dataclass(frozen=True)
class BatchSizeConfig:
    data: str
    """Self-play shards; made here (`trainspeed data mahjong-selfplay`) when missing."""
    out: str
    size: str = "tiny"
    target: str = "cpu:eager:fp32"
    nproc: int = 2
    threads: int = 1
    num_workers: int = 1
    batches: tuple[int, ...] = (256, 1024, 8192)
    samples: int = 131072
    """Samples seen by every run (equal for every batch)."""
    base_lr: float = 1.5e-3
    """Peak LR at the reference batch; a batch b starts from base_lr x sqrt(b / reference_batch)."""
    reference_batch: int = 512
    lr_factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    """Multiples of the square-root-scaled LR tried at every batch."""
    warmup_samples: int = 16384
    seeds: tuple[int, ...] = (0, 1)
    val_samples: int | None = None
    """Cap on validation samples per pass (a multiple of every batch); None: the whole split."""
    eval_games: int = 1000
    eval_seed: int = 0
    eval_parallel: int = 2
    eval_batch_games: int = 64
    runs_dir: str = ""
    """Where the runs and their evaluations go (default: OUT/batch_size_runs)."""
    make_data_games: int = 400
    data_seed: int = 1

    @property
    def equal_steps(self) -> int:
        """Steps of the largest batch: the step at which every run is compared at equal steps."""
        return self.samples // max(self.batches)

    @property
    def runs(self) -> Path:
        return Path(self.runs_dir) if self.runs_dir else Path(self.out) / "batch_size_runs"

    def check(self) -> None:
        for flag, value, least in (("--nproc", self.nproc, 1), ("--threads", self.threads, 1),
                                   ("--num-workers", self.num_workers, 0), ("--samples", self.samples, 1),
                                   ("--reference-batch", self.reference_batch, 1), ("--warmup-samples", self.warmup_samples, 0),
                                   ("--eval-parallel", self.eval_parallel, 1), ("--eval-batch-games", self.eval_batch_games, 1),
                                   ("--make-data-games", self.make_data_games, 1)):
            if value < least:
                raise UsageError(f"batch-size study: {flag} must be at least {least}, got {value}")
        if not 0 < self.base_lr < float("inf"):
            raise UsageError(f"batch-size study: --base-lr must be a positive number, got {self.base_lr}")
        for batch in self.batches:
            if batch % self.nproc or self.samples % batch:
                raise UsageError(f"batch-size study: global batch {batch} must divide --samples {self.samples} "
                                 f"and be divisible by --nproc {self.nproc}")
            if self.val_samples is not None and self.val_samples % batch:
                raise UsageError(f"batch-size study: --val-samples {self.val_samples} must be a multiple of batch {batch}")
        if self.eval_games % 4 or self.eval_games <= 0:
            raise UsageError(f"batch-size study: --eval-games {self.eval_games} must be a positive multiple of 4")


PRESETS = {
    "smoke": dict(batches=(32, 64), samples=256, lr_factors=(1.0,), seeds=(0,), warmup_samples=64, eval_games=8,
                  eval_parallel=1, eval_batch_games=8, make_data_games=22, val_samples=64),
    "quick": dict(batches=(256, 1024), samples=16384, lr_factors=(1.0, 2.0), seeds=(0,), warmup_samples=2048,
                  eval_games=200, make_data_games=100, val_samples=4096),
    "full": dict(lr_factors=(0.5, 1.0, 2.0, 4.0)),
}
"""The study's settings per preset; `full` is the committed study's."""


@dataclass(frozen=True)
class BatchSizeSettingsRow:
    """The study's settings, the command and how long it took."""

    KIND: ClassVar[str] = "batch-size-config"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    settings: BatchSizeConfig
    equal_steps: int
    command: str
    train_s: float
    total_s: float
    machine: Machine | None = None


@dataclass(frozen=True)
class BatchSizeRunRow:
    """One training run: validation at equal samples (its end) and at equal steps, its time, and its
    playing strength where it was evaluated (the best learning rate of its batch)."""

    KIND: ClassVar[str] = "batch-size-run"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    run: str
    run_dir: str
    global_batch: int
    nproc: int
    batch_size_per_device: int
    lr_factor: float
    peak_lr: float
    seed: int
    """The training seed (the evaluation's seed is its own row's)."""
    steps: int
    warmup_steps: int
    samples: int
    val_loss: float
    val_accuracy: float
    majority_baseline: float
    val_samples: float
    equal_steps: int
    equal_steps_samples: int
    equal_steps_val_loss: float
    equal_steps_val_accuracy: float
    curve: list[list[float]]
    """[samples seen, validation loss, validation accuracy] at every validation."""
    train_wall_s: float
    """Training time: the run's wall time from its first to its last step, plus its pauses."""
    process_s: float | None
    """The `trainspeed train` process's whole time (None: trained by an earlier invocation)."""
    end_to_end_samples_per_s: float
    command: str
    eval_id: str | None = None
    """The evaluation of this run's policy, where it was evaluated."""
    mean_rank: float | None = None
    mean_rank_ci95: list[float] | None = None
    workload_module: str | None = None
    workload_version: str | None = None
    workload_sha256: str | None = None
    machine: Machine | None = None
    """The machine of the run (its summary's)."""


@dataclass(frozen=True)
class BatchSizeBatchRow:
    """One global batch: its best learning rate (lowest mean final validation loss over seeds) and
    that LR's validation metrics, wall time and playing strength pooled over the seeds."""

    KIND: ClassVar[str] = "batch-size-batch"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    global_batch: int
    best_lr_factor: float
    peak_lr: float
    steps: int
    seeds: list[int]
    lr_sweep: dict[str, float]
    """Mean final validation loss over seeds per LR factor."""
    val_loss: float
    val_loss_per_seed: list[float]
    val_accuracy: float
    val_accuracy_per_seed: list[float]
    majority_baseline: float
    equal_steps: int
    equal_steps_val_loss: float
    equal_steps_val_accuracy: float
    train_wall_s: float
    eval_games: int
    mean_rank: float
    mean_rank_ci95: list[float] | None
    mean_rank_ci95_half_width: float | None
    mean_rank_per_seed: list[float]
    mean_rank_ci95_per_seed: list[list[float] | None]
    mean_rank_ci95_half_width_per_seed: list[float | None]
    mean_score_delta: float


@dataclass(frozen=True)
class BatchSizeComparisonRow:
    """Mean rank of the largest batch minus that of another, deal by deal (both pooled over seeds):
    below zero, the largest batch played better on the same walls."""

    KIND: ClassVar[str] = "batch-size-comparison"
    SCHEMA_VERSION: ClassVar[int] = 1

    study_id: str
    global_batch: int
    versus_batch: int
    mean_rank_difference: float
    ci95: list[float] | None
    deals: int
    verdict: str
    """On "the larger batch plays stronger": "supported" (the 95% interval is below 0),
    "contradicted" (above 0) or "inconclusive" (it holds 0)."""


def verdict(ci95: list[float] | None) -> str:
    if ci95 is None:
        return "inconclusive"
    if ci95[1] < 0:
        return "supported"
    if ci95[0] > 0:
        return "contradicted"
    return "inconclusive"


@dataclass(frozen=True)
class RunSpec:
    batch: int
    lr_factor: float
    seed: int

    @property
    def name(self) -> str:
        return f"b{self.batch}-lr{self.lr_factor:g}-s{self.seed}"


def peak_lr(config: BatchSizeConfig, spec: RunSpec) -> float:
    return config.base_lr * spec.lr_factor * math.sqrt(spec.batch / config.reference_batch)


def run_dir(config: BatchSizeConfig, spec: RunSpec) -> Path:
    return config.runs / spec.name


def train_args(config: BatchSizeConfig, spec: RunSpec) -> list[str]:
    steps = config.samples // spec.batch
    warmup = max(1, round(config.warmup_samples / spec.batch))
    args = [
        "train", "--workload", "mahjong", "--size", config.size, "--data", config.data,
        "--target", config.target, "--nproc", str(config.nproc), "--threads", str(config.threads),
        "--num-workers", str(config.num_workers), "--batch-size-per-device", str(spec.batch // config.nproc),
        "--steps", str(steps), "--seed", str(spec.seed),
        "--lr", f"{config.base_lr * spec.lr_factor:g}", "--lr-scaling", "sqrt",
        "--lr-reference-batch", str(config.reference_batch), "--warmup-steps", str(warmup),
        "--eval-every", str(config.equal_steps), "--log-every", str(max(1, steps // 16)),
        "--out", str(run_dir(config, spec)), "--no-progress",
    ]
    if config.val_samples is not None:
        args += ["--eval-batches", str(config.val_samples // spec.batch)]
    return args


def is_trained(config: BatchSizeConfig, spec: RunSpec) -> bool:
    summary = run_dir(config, spec) / SUMMARY_FILE
    return summary.exists() and read_summary(summary).last_step == config.samples // spec.batch


def train(config: BatchSizeConfig, spec: RunSpec) -> float | None:
    """Run one training unless it finished before; its wall seconds (None when skipped)."""
    if is_trained(config, spec):
        return None
    args = train_args(config, spec)
    if run_dir(config, spec).exists():
        args.append("--resume")
    print(shown(*args), flush=True)
    started = time.perf_counter()
    run_trainspeed(*args)
    return time.perf_counter() - started


def validations(config: BatchSizeConfig, spec: RunSpec) -> dict[int, EvalRecord]:
    path = run_dir(config, spec) / METRICS_FILE
    records = [EvalRecord.from_row(record, source) for record, source in read_records(path)
               if isinstance(record, dict) and record.get("kind") == EvalRecord.KIND]
    return {record.step: record for record in records}


def run_row(study_id: str, config: BatchSizeConfig, spec: RunSpec, process_s: float | None) -> BatchSizeRunRow:
    steps = config.samples // spec.batch
    vals = validations(config, spec)
    missing = [step for step in (config.equal_steps, steps) if step not in vals]
    if missing:
        raise StudyFailed(f"run {run_dir(config, spec)} has no validation at step {missing[0]}: the data's validation "
                          f"split is empty (make the data with more games) or the run did not validate")
    summary: RunSummary = read_summary(run_dir(config, spec) / SUMMARY_FILE)
    final, at_equal_steps = vals[steps].metrics, vals[config.equal_steps].metrics
    return BatchSizeRunRow(
        study_id=study_id, run=spec.name, run_dir=str(run_dir(config, spec)),
        global_batch=spec.batch, nproc=config.nproc, batch_size_per_device=spec.batch // config.nproc,
        lr_factor=spec.lr_factor, peak_lr=peak_lr(config, spec), seed=spec.seed, steps=steps,
        warmup_steps=max(1, round(config.warmup_samples / spec.batch)), samples=config.samples,
        val_loss=final["loss"], val_accuracy=final["accuracy"], majority_baseline=final["majority_baseline"],
        val_samples=final["samples"],
        equal_steps=config.equal_steps, equal_steps_samples=config.equal_steps * spec.batch,
        equal_steps_val_loss=at_equal_steps["loss"], equal_steps_val_accuracy=at_equal_steps["accuracy"],
        curve=[[step * spec.batch, record.metrics["loss"], record.metrics["accuracy"]]
               for step, record in sorted(vals.items())],
        train_wall_s=summary.wall_s + (summary.paused_s or 0.0), process_s=process_s,
        end_to_end_samples_per_s=summary.end_to_end_samples_per_s, command=shown(*train_args(config, spec)),
        workload_module=summary.workload_module, workload_version=summary.workload_version,
        workload_sha256=summary.workload_sha256, machine=summary.machine,
    )


def eval_out(config: BatchSizeConfig, spec: RunSpec) -> Path:
    return config.runs / "evals" / f"{spec.name}.jsonl"


def eval_args(config: BatchSizeConfig, spec: RunSpec) -> list[str]:
    return ["eval", "mahjong", "--policy", str(run_dir(config, spec)), "--opponent", "rule-based",
            "--games", str(config.eval_games), "--seed", str(config.eval_seed), "--target", config.target,
            "--threads", str(config.threads), "--batch-games", str(config.eval_batch_games),
            "--out", str(eval_out(config, spec)), "--no-progress", "--no-plot"]


def evaluated_row(config: BatchSizeConfig, spec: RunSpec) -> MahjongEvalRow | None:
    path = eval_out(config, spec)
    rows = [row for row in (read_eval_rows(path) if path.exists() else [])
            if row.games == config.eval_games and row.seed == config.eval_seed]
    return rows[-1] if rows else None


def evaluate(config: BatchSizeConfig, spec: RunSpec) -> MahjongEvalRow:
    if evaluated_row(config, spec) is None:
        args = eval_args(config, spec)
        print(shown(*args), flush=True)
        run_trainspeed(*args)
    row = evaluated_row(config, spec)
    assert row is not None
    return row


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def pooled_clusters(evals: list[MahjongEvalRow]) -> list[list[int]]:
    """Per deal, every game of it over the given evaluations (they played the same deals)."""
    return [sum((row.deal_ranks[deal] for row in evals), []) for deal in range(evals[0].deals)]


def batch_row(study_id: str, config: BatchSizeConfig, batch: int, runs: list[BatchSizeRunRow],
              evals: list[MahjongEvalRow]) -> BatchSizeBatchRow:
    by_factor: dict[float, list[BatchSizeRunRow]] = {}
    for row in runs:
        by_factor.setdefault(row.lr_factor, []).append(row)
    best = min(by_factor, key=lambda factor: _mean([row.val_loss for row in by_factor[factor]]))
    chosen = by_factor[best]
    strength = clustered_mean(pooled_clusters(evals), bounds=(1.0, 4.0))
    return BatchSizeBatchRow(
        study_id=study_id, global_batch=batch, best_lr_factor=best, peak_lr=chosen[0].peak_lr,
        steps=chosen[0].steps, seeds=[row.seed for row in chosen],
        lr_sweep={f"{factor:g}": _mean([row.val_loss for row in rows]) for factor, rows in sorted(by_factor.items())},
        val_loss=_mean([row.val_loss for row in chosen]), val_loss_per_seed=[row.val_loss for row in chosen],
        val_accuracy=_mean([row.val_accuracy for row in chosen]),
        val_accuracy_per_seed=[row.val_accuracy for row in chosen],
        majority_baseline=chosen[0].majority_baseline, equal_steps=config.equal_steps,
        equal_steps_val_loss=_mean([row.equal_steps_val_loss for row in chosen]),
        equal_steps_val_accuracy=_mean([row.equal_steps_val_accuracy for row in chosen]),
        train_wall_s=_mean([row.train_wall_s for row in chosen]),
        eval_games=sum(row.games for row in evals),
        mean_rank=strength.mean, mean_rank_ci95=list(strength.ci95) if strength.ci95 else None,
        mean_rank_ci95_half_width=strength.half_width,
        mean_rank_per_seed=[row.mean_rank for row in evals],
        mean_rank_ci95_per_seed=[row.mean_rank_ci95 for row in evals],
        mean_rank_ci95_half_width_per_seed=[row.mean_rank_ci95_half_width for row in evals],
        mean_score_delta=_mean([row.mean_score_delta for row in evals]),
    )


def comparison_row(study_id: str, largest: int, other: int,
                   evals: dict[int, list[MahjongEvalRow]]) -> BatchSizeComparisonRow:
    big, small = pooled_clusters(evals[largest]), pooled_clusters(evals[other])
    result = clustered_mean([[_mean(b) - _mean(s)] for b, s in zip(big, small)])
    ci95 = list(result.ci95) if result.ci95 else None
    return BatchSizeComparisonRow(study_id=study_id, global_batch=largest, versus_batch=other,
                                  mean_rank_difference=result.mean, ci95=ci95, deals=result.clusters,
                                  verdict=verdict(ci95))


def make_data(config: BatchSizeConfig) -> None:
    if (Path(config.data) / "index.json").exists():
        return
    args = ["data", "mahjong-selfplay", "--games", str(config.make_data_games), "--workers", "2",
            "--out", config.data, "--seed", str(config.data_seed), "--no-progress"]
    print(shown(*args), flush=True)
    run_trainspeed(*args)


def specs(config: BatchSizeConfig) -> list[RunSpec]:
    return [RunSpec(batch, factor, seed) for batch in config.batches for seed in config.seeds
            for factor in config.lr_factors]


def units(config: BatchSizeConfig) -> int:
    """Work units for a progress bar: the data, every training and every evaluation."""
    return 1 + len(specs(config)) + len(config.batches) * len(config.seeds)


def estimate_s(config: BatchSizeConfig) -> float:
    """Seconds on a 2-core CPU at the tiny size: a command's start per run and evaluation (~10 s more
    for torchrun's ranks), ~2,000 samples/s of training, ~8 games/s of evaluation, ~1 game/s of
    self-play data."""
    training = sum(COMMAND_START_S + 10 * (config.nproc > 1) + config.samples / 2000 for _ in specs(config))
    evaluation = (len(config.batches) * len(config.seeds) * (COMMAND_START_S + config.eval_games / 8)
                  / max(1, config.eval_parallel))
    data = 0 if (Path(config.data) / "index.json").exists() else COMMAND_START_S + config.make_data_games
    return data + training + evaluation


def run(config: BatchSizeConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    """The whole study; returns the rows file it wrote."""
    config.check()
    study_id = f"batch-size-{int(time.time())}"
    started = time.perf_counter()
    make_data(config)
    progress(1, "batch-size: training")
    runs = []
    for spec in specs(config):
        runs.append(run_row(study_id, config, spec, train(config, spec)))
        progress(1, f"batch-size: trained {spec.name}")
    trained_s = time.perf_counter() - started
    best = {batch: min(config.lr_factors, key=lambda f: _mean([r.val_loss for r in runs
                                                                if r.global_batch == batch and r.lr_factor == f]))
            for batch in config.batches}
    to_evaluate = [RunSpec(batch, best[batch], seed) for batch in config.batches for seed in config.seeds]

    def evaluated(spec: RunSpec) -> MahjongEvalRow:
        row = evaluate(config, spec)
        progress(1, f"batch-size: evaluated {spec.name}")
        return row

    with ThreadPoolExecutor(max_workers=config.eval_parallel) as pool:
        evals = dict(zip([spec.name for spec in to_evaluate], pool.map(evaluated, to_evaluate)))
    runs = [dataclasses.replace(row, eval_id=evals[row.run].eval_id, mean_rank=evals[row.run].mean_rank,
                                mean_rank_ci95=evals[row.run].mean_rank_ci95) if row.run in evals else row
            for row in runs]
    by_batch = {batch: [evals[spec.name] for spec in to_evaluate if spec.batch == batch] for batch in config.batches}
    batches = [batch_row(study_id, config, batch, [r for r in runs if r.global_batch == batch], by_batch[batch])
               for batch in config.batches]
    largest = max(config.batches)
    comparisons = [comparison_row(study_id, largest, batch, by_batch) for batch in config.batches if batch != largest]
    header = BatchSizeSettingsRow(study_id=study_id, settings=config, equal_steps=config.equal_steps,
                                  command=command, train_s=trained_s, total_s=time.perf_counter() - started,
                                  machine=runs[0].machine)
    out = Path(config.out) / ROWS_FILE
    for row in [header, *runs, *evals.values(), *batches, *comparisons]:
        append_row(out, row)
    print(table(batches, comparisons))
    return [out]


def table(batches: list[BatchSizeBatchRow], comparisons: list[BatchSizeComparisonRow]) -> str:
    lines = ["| global batch | steps | best LR (peak) | val NLL / acc, equal samples | val NLL / acc, equal steps "
             "| train wall s | mean rank vs rule-based [95% CI] | games |",
             "|---:|---:|---|---|---|---:|---|---:|"]
    for batch in batches:
        low, high = batch.mean_rank_ci95 or (math.nan, math.nan)
        lines.append(
            f"| {batch.global_batch} | {batch.steps} | x{batch.best_lr_factor:g} ({batch.peak_lr:.2g}) "
            f"| {batch.val_loss:.4f} / {batch.val_accuracy:.2%} "
            f"| {batch.equal_steps_val_loss:.4f} / {batch.equal_steps_val_accuracy:.2%} "
            f"| {batch.train_wall_s:.0f} | {batch.mean_rank:.3f} [{low:.3f}, {high:.3f}] | {batch.eval_games} |")
    for row in comparisons:
        low, high = row.ci95 or (math.nan, math.nan)
        lines.append(f"\nbatch {row.global_batch} minus batch {row.versus_batch}: mean rank "
                     f"{row.mean_rank_difference:+.3f} [{low:+.3f}, {high:+.3f}] over {row.deals} deals: {row.verdict}")
    return "\n".join(lines)


SCALAR_FLAGS = {
    "size": (str, "Mahjong size (default tiny)"),
    "target": (str, "target of every run and evaluation (default cpu:eager:fp32)"),
    "nproc": (int, "ranks of every run (default 2)"),
    "threads": (int, "torch threads per rank and per evaluation (default 1)"),
    "num_workers": (int, "loader workers per rank (default 1)"),
    "samples": (int, "samples seen by every run"),
    "base_lr": (float, "peak LR at the reference batch (default 1.5e-3)"),
    "reference_batch": (int, "the batch base_lr is for; a batch b starts from base_lr x sqrt(b / this) (default 512)"),
    "warmup_samples": (int, "LR warm-up, in samples (default 16384)"),
    "val_samples": (int, "cap on validation samples per pass (default: the whole split)"),
    "eval_games": (int, "duplicate games per evaluated policy"),
    "eval_seed": (int, "the evaluation's seed: which deals (default 0)"),
    "eval_parallel": (int, "evaluations at once (default 2)"),
    "eval_batch_games": (int, "games played at once per evaluation (default 64)"),
    "runs_dir": (str, "where the runs and evaluations go (default OUT/batch_size_runs)"),
    "make_data_games": (int, "self-play games made when --data is missing"),
    "data_seed": (int, "seed of those games (default 1)"),
}
"""The study's settings that are one value each, as flags (None: the preset's)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, help="self-play shards; made when missing (default: OUT/batch_size_data)")
    for name, (kind, help) in SCALAR_FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help=help)
    parser.add_argument("--batches", default=None, help="global batches, e.g. 256,1024,8192")
    parser.add_argument("--lr-factors", default=None, help="multiples of the square-root-scaled LR, e.g. 0.5,1,2")
    parser.add_argument("--seeds", default=None, help="training seeds, e.g. 0,1")


def preset_config(preset: str, out: Path) -> BatchSizeConfig:
    return BatchSizeConfig(data=str(out / "batch_size_data"), out=str(out), **PRESETS[preset])  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> BatchSizeConfig:
    values: dict[str, object] = dict(PRESETS[args.preset])
    values.update({name: getattr(args, name) for name in SCALAR_FLAGS if getattr(args, name) is not None})
    if args.batches is not None:
        values["batches"] = positive_ints(args.batches, "--batches")
    if args.seeds is not None:
        values["seeds"] = non_negative_ints(args.seeds, "--seeds")
    if args.lr_factors is not None:
        values["lr_factors"] = positive_floats(args.lr_factors, "--lr-factors")
    config = BatchSizeConfig(data=args.data or str(out / "batch_size_data"), out=str(out), **values)  # type: ignore[arg-type]
    config.check()
    return config
