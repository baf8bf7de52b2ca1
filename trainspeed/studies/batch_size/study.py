"""Finding 4: does a larger global batch train a stronger Mahjong policy? The batch-size study.

The study trainspeed follows reports that training at global batch 8192 (8 devices x 1024) made
the policy play clearly better. Batch-size comparisons mislead unless the learning rate is tuned
per batch and the budget is fixed, so this study:

1. plans its power first: the smallest difference in mean rank its seeds and games can detect
   (printed, and in the settings row), from assumed spreads that the results then replace;
2. measures each batch's samples/s on one device (`trainspeed bench`, one run, so the ratios are
   of one run) for the equal-wall-time framing;
3. trains every global batch on the same data and the same number of samples: the learning rate
   (several multiples of the square-root-scaled one) tuned on one seed, then every seed at the best;
   every run keeps evenly spaced checkpoints;
4. evaluates every seed's policy against three rule-based agents on the same deals in three
   framings: equal samples (the end of every run), equal steps (every batch at the largest batch's
   last step) and equal wall time (every batch at the samples its measured samples/s reaches in the
   time the fastest batch needs for the budget: the study's own framing, where 8 cores processed 11x
   one GPU's samples in the same days);
5. plays the largest batch's policies against the smallest batch's, seed by seed (head to head);
6. gives each comparison an interval over seeds and deals (a crossed bootstrap) and a verdict:
   "supported", "contradicted", or "inconclusive at a minimum detectable difference of x ranks".

Every training is a `trainspeed train` run in one of up to --parallel-runs warm processes
(`trainspeed.studies.warm_runs`), every evaluation a `trainspeed eval mahjong` (a rerun skips what
is done). Rows go to OUT/batch_size.jsonl under one study id.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

from trainspeed.bench.results import ResultRow
from trainspeed.evaluate.power import PowerPlan, plan_power
from trainspeed.evaluate.rows import MahjongEvalRow, read_eval_rows
from trainspeed.rows import append_row, parse_row, read_records
from trainspeed.studies.batch_size.comparisons import (
    batch_row,
    comparison_row,
    head_to_head_row,
    strength_row,
)
from trainspeed.studies.batch_size.config import FRAMINGS, PRESETS, BatchSizeConfig
from trainspeed.studies.batch_size.rows import (
    ROWS_FILE,
    BatchSizeBatchRow,
    BatchSizeComparisonRow,
    BatchSizeRunRow,
    BatchSizeSettingsRow,
    BatchSizeStrengthRow,
)
from trainspeed.studies.checks import (
    check_mahjong_settings,
    check_study_data,
    data_ready,
    selfplay_workers,
)
from trainspeed.studies.common import (
    COMMAND_START_S,
    Progress,
    RunSpec,
    StudyFailed,
    no_progress,
    run_trainspeed,
    shown,
)
from trainspeed.studies.face import preset_settings
from trainspeed.studies.warm_runs.runner import WARM_RUN_START_S, TrainJob, WarmRunner
from trainspeed.train.config import LaunchConfig, LRConfig, TrainConfig
from trainspeed.train.flags import train_command
from trainspeed.train.runs import has_summary, read_run, read_run_summary

THROUGHPUT_FILE = "batch_size_throughput.jsonl"


def peak_lr(config: BatchSizeConfig, spec: RunSpec) -> float:
    return config.base_lr * spec.lr_factor * math.sqrt(spec.batch / config.reference_batch)


def run_dir(config: BatchSizeConfig, spec: RunSpec) -> Path:
    return config.runs / spec.name


def run_config(config: BatchSizeConfig, spec: RunSpec) -> TrainConfig:
    """The TrainConfig of one run: the study's samples at its batch, its learning-rate factor and
    seed, a validation at the equal-steps step, evenly spaced checkpoints, every one kept."""
    steps = config.steps(spec.batch)
    return TrainConfig(
        workload="mahjong", size=config.size, data=config.data, target=config.target,
        launch=LaunchConfig(nproc=config.nproc), threads=config.threads, num_workers=config.num_workers,
        batch_size_per_device=spec.batch // config.nproc, steps=steps, seed=spec.seed,
        lr=LRConfig(base_lr=float(f"{config.base_lr * spec.lr_factor:g}"), scaling="sqrt",
                    reference_batch=config.reference_batch,
                    warmup_steps=max(1, round(config.warmup_samples / spec.batch))),
        eval_every=config.equal_steps, log_every=max(1, steps // 16),
        checkpoint_every=config.checkpoint_every(spec.batch), keep_checkpoints=0,
        eval_batches=None if config.val_samples is None else config.val_samples // spec.batch,
        out_dir=str(run_dir(config, spec)), progress=False)


def is_trained(config: BatchSizeConfig, spec: RunSpec) -> bool:
    directory = run_dir(config, spec)
    return has_summary(directory) and read_run_summary(directory).last_step == config.steps(spec.batch)


def train_job(config: BatchSizeConfig, spec: RunSpec) -> TrainJob:
    """One training (an interrupted one continues)."""
    return TrainJob(spec.name, dataclasses.replace(run_config(config, spec), resume=run_dir(config, spec).exists()))


def run_row(study_id: str, config: BatchSizeConfig, spec: RunSpec) -> BatchSizeRunRow:
    steps = config.steps(spec.batch)
    run = read_run(run_dir(config, spec))
    vals = run.validations()
    missing = [step for step in (config.equal_steps, steps) if step not in vals]
    if missing:
        raise StudyFailed(f"run {run_dir(config, spec)} has no validation at step {missing[0]}: the data's validation "
                          f"split is empty (make the data with more games) or the run did not validate")
    summary = run.summary
    final, at_equal_steps = vals[steps].metrics, vals[config.equal_steps].metrics
    return BatchSizeRunRow(
        study_id=study_id, run=spec.name, run_dir=str(run_dir(config, spec)),
        global_batch=spec.batch, nproc=config.nproc, batch_size_per_device=spec.batch // config.nproc,
        lr_factor=spec.lr_factor, peak_lr=peak_lr(config, spec), train_seed=spec.seed, steps=steps,
        warmup_steps=max(1, round(config.warmup_samples / spec.batch)), samples=config.samples,
        checkpoint_every=config.checkpoint_every(spec.batch),
        val_loss=final["loss"], val_accuracy=final["accuracy"], majority_baseline=final["majority_baseline"],
        val_samples=final["samples"],
        equal_steps=config.equal_steps, equal_steps_samples=config.equal_steps * spec.batch,
        equal_steps_val_loss=at_equal_steps["loss"], equal_steps_val_accuracy=at_equal_steps["accuracy"],
        curve=[[step * spec.batch, record.metrics["loss"], record.metrics["accuracy"]]
               for step, record in sorted(vals.items())],
        train_wall_s=summary.wall_s + (summary.paused_s or 0.0),
        end_to_end_samples_per_s=summary.end_to_end_samples_per_s,
        **summary.provenance(shown(*train_command(run_config(config, spec)))).fields_of(BatchSizeRunRow),
    )


# --- throughput on one device ---------------------------------------------------------------------

def throughput_args(config: BatchSizeConfig, out: Path) -> list[str]:
    return ["bench", "--workload", "mahjong", "--size", config.size, "--targets", config.target,
            "--batch-sizes", ",".join(str(b) for b in config.batches), "--threads", str(config.threads),
            "--min-window-s", f"{config.bench_min_window_s:g}", "--out", str(out), "--no-progress", "--no-plot"]


def measure_throughput(config: BatchSizeConfig) -> tuple[str, dict[int, float]]:
    """Each batch's samples/s on one device, from one bench run (the newest in the file)."""
    out = Path(config.out) / THROUGHPUT_FILE
    if not _throughput_rows(out, config):
        args = throughput_args(config, out)
        print(shown(*args), flush=True)
        run_trainspeed(*args)
    rows = _throughput_rows(out, config)
    if not rows:
        raise StudyFailed(f"{out}: the bench measured no samples/s for batches {config.batches}")
    return rows[0].run_id, {row.batch_size: row.samples_per_s for row in rows}


def _throughput_rows(out: Path, config: BatchSizeConfig) -> list[ResultRow]:
    if not out.exists():
        return []
    rows = [parse_row(ResultRow, record, source)[0] for record, source in read_records(out)
            if isinstance(record, dict) and record.get("kind") == ResultRow.KIND]
    runs = {row.run_id: [] for row in rows}
    for row in rows:
        if row.status == "ok" and row.size == config.size and row.target == config.target:
            runs[row.run_id].append(row)
    complete = [kept for kept in runs.values() if {row.batch_size for row in kept} >= set(config.batches)]
    return [row for row in complete[-1] if row.batch_size in config.batches] if complete else []


# --- checkpoints of each framing ------------------------------------------------------------------

def framing_step(config: BatchSizeConfig, framing: str, batch: int, samples_per_s: dict[int, float]) -> int:
    """The step of batch `batch`'s checkpoint that the framing compares (a kept one)."""
    every = config.checkpoint_every(batch)
    if framing == "equal samples":
        return config.steps(batch)
    if framing == "equal steps":
        return config.equal_steps
    fastest = max(samples_per_s.values())
    samples = config.samples * samples_per_s[batch] / fastest
    return max(every, int(samples // batch) // every * every)


# --- evaluations ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Evaluation:
    """One policy (a run's checkpoint) against an opponent (rule-based, or another run's final one)."""

    spec: RunSpec
    step: int
    opponent: RunSpec | None = None

    @property
    def name(self) -> str:
        against = "rule-based" if self.opponent is None else self.opponent.name
        return f"{self.spec.name}@{self.step}-vs-{against}"


def eval_out(config: BatchSizeConfig, evaluation: Evaluation) -> Path:
    return config.runs / "evals" / f"{evaluation.name}.jsonl"


def eval_games(config: BatchSizeConfig, evaluation: Evaluation) -> int:
    return config.eval_games if evaluation.opponent is None else config.head_to_head_games


def eval_args(config: BatchSizeConfig, evaluation: Evaluation) -> list[str]:
    opponent = "rule-based" if evaluation.opponent is None else str(run_dir(config, evaluation.opponent))
    return ["eval", "mahjong", "--policy", str(run_dir(config, evaluation.spec)), "--step", str(evaluation.step),
            "--opponent", opponent, "--games", str(eval_games(config, evaluation)), "--seed", str(config.eval_seed),
            "--target", config.target, "--threads", str(config.threads), "--workers", str(config.eval_workers),
            "--batch-games", str(config.eval_batch_games), "--out", str(eval_out(config, evaluation)),
            "--no-progress", "--no-plot"]


def evaluated_row(config: BatchSizeConfig, evaluation: Evaluation) -> MahjongEvalRow | None:
    path = eval_out(config, evaluation)
    rows = [row for row in (read_eval_rows(path) if path.exists() else [])
            if row.games == eval_games(config, evaluation) and row.eval_seed == config.eval_seed
            and row.policy_step == evaluation.step]
    return rows[-1] if rows else None


def evaluate(config: BatchSizeConfig, evaluation: Evaluation) -> MahjongEvalRow:
    if evaluated_row(config, evaluation) is None:
        args = eval_args(config, evaluation)
        print(shown(*args), flush=True)
        run_trainspeed(*args)
    row = evaluated_row(config, evaluation)
    assert row is not None
    return row


def make_data(config: BatchSizeConfig) -> None:
    if data_ready(config.data):
        return
    args = ["data", "mahjong-selfplay", "--games", str(config.make_data_games), "--workers", selfplay_workers(),
            "--out", config.data, "--seed", str(config.data_seed), "--no-progress"]
    print(shown(*args), flush=True)
    run_trainspeed(*args)


def power_plan(config: BatchSizeConfig) -> PowerPlan:
    return plan_power(len(config.seeds), config.eval_games // 4, game_rank_sd=config.assumed_game_rank_sd,
                      within_deal_correlation=config.assumed_within_deal_correlation, seed_sd=config.assumed_seed_sd)


def tuning_specs(config: BatchSizeConfig) -> list[RunSpec]:
    return [RunSpec(batch, factor, config.tuning_seed) for batch in config.batches for factor in config.lr_factors]


def seed_specs(config: BatchSizeConfig, best: dict[int, float]) -> list[RunSpec]:
    return [RunSpec(batch, best[batch], seed) for batch in config.batches for seed in config.seeds
            if seed != config.tuning_seed]


def units(config: BatchSizeConfig) -> int:
    """Work units for a progress bar: data, throughput, every training, every evaluation (at most)."""
    policies = len(config.batches) * len(config.seeds)
    return 2 + len(tuning_specs(config)) + policies - len(config.batches) + 3 * policies + len(config.seeds)


def estimate_s(config: BatchSizeConfig) -> float:
    """Seconds on a 2-core CPU at the tiny size: a command's start per evaluation and per warm
    process, a warm start per run, about 1,500 samples/s per training, 4 games/s per evaluation
    worker, 1 game/s of self-play data."""
    runs = len(tuning_specs(config)) + len(config.batches) * (len(config.seeds) - 1)
    workers = min(config.parallel_runs, runs)
    training = workers * COMMAND_START_S + runs * (WARM_RUN_START_S + config.samples / 1500) / config.parallel_runs
    policies = len(config.batches) * len(config.seeds)
    games = 3 * policies * config.eval_games + len(config.seeds) * config.head_to_head_games * 3
    evaluation = (3 * policies + len(config.seeds)) * COMMAND_START_S + games / (4 * config.eval_workers)
    data = 0 if data_ready(config.data) else COMMAND_START_S + config.make_data_games
    return data + 60 + training + evaluation


def train_all(config: BatchSizeConfig, specs: list[RunSpec], progress: Progress) -> None:
    """Every run of `specs` an earlier study did not finish, on up to --parallel-runs warm processes
    (`trainspeed.studies.warm_runs`)."""
    done = [spec for spec in specs if is_trained(config, spec)]
    for spec in done:
        progress(1, f"batch-size: trained {spec.name}")

    def trained(job: TrainJob) -> list[TrainJob]:
        progress(1, f"batch-size: trained {job.name}")
        return []

    WarmRunner(config.parallel_runs).run([train_job(config, spec) for spec in specs if spec not in done], trained)


def run(config: BatchSizeConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    """The whole study; returns the rows file it wrote."""
    config.check()
    study_id = f"batch-size-{int(time.time())}"
    plan = power_plan(config)
    print(f"batch-size study: {len(config.seeds)} seeds x {config.eval_games} games per policy can detect a difference "
          f"of {plan.minimum_detectable_difference:.3f} ranks (80% power, 5% two-sided; assumed game rank sd "
          f"{plan.game_rank_sd}, within-deal correlation {plan.within_deal_correlation}, seed sd {plan.seed_sd})",
          flush=True)
    started = time.perf_counter()
    make_data(config)
    progress(1, "batch-size: throughput")
    throughput_run, samples_per_s = measure_throughput(config)
    progress(1, "batch-size: training")
    train_all(config, tuning_specs(config), progress)
    tuned = [run_row(study_id, config, spec) for spec in tuning_specs(config)]
    best = {batch: min((row for row in tuned if row.global_batch == batch), key=lambda row: row.val_loss).lr_factor
            for batch in config.batches}
    train_all(config, seed_specs(config, best), progress)
    runs = tuned + [run_row(study_id, config, spec) for spec in seed_specs(config, best)]
    trained_s = time.perf_counter() - started

    finals = {batch: [RunSpec(batch, best[batch], seed) for seed in config.seeds] for batch in config.batches}
    evaluations: dict[str, MahjongEvalRow] = {}

    def evaluated(evaluation: Evaluation) -> MahjongEvalRow:
        if evaluation.name not in evaluations:
            evaluations[evaluation.name] = evaluate(config, evaluation)
            progress(1, f"batch-size: evaluated {evaluation.name}")
        return evaluations[evaluation.name]

    largest, smallest = max(config.batches), min(config.batches)
    strengths, comparisons = [], []
    for framing in FRAMINGS:
        by_batch = {}
        for batch in config.batches:
            step = framing_step(config, framing, batch, samples_per_s)
            by_batch[batch] = [evaluated(Evaluation(spec, step)) for spec in finals[batch]]
            strengths.append(strength_row(study_id, config, framing, batch, step, by_batch[batch]))
        comparisons += [comparison_row(study_id, framing, largest, batch, by_batch[largest], by_batch[batch])
                        for batch in config.batches if batch != largest]
    head_to_head = [evaluated(Evaluation(large, config.steps(largest), opponent=small))
                    for large, small in zip(finals[largest], finals[smallest])]
    comparisons.append(head_to_head_row(study_id, largest, smallest, head_to_head))
    header = BatchSizeSettingsRow(
        study_id=study_id, settings=config, equal_steps=config.equal_steps, power=plan,
        samples_per_s={str(batch): value for batch, value in samples_per_s.items()}, throughput_run_id=throughput_run,
        command=command, train_s=trained_s, eval_s=time.perf_counter() - started - trained_s,
        total_s=time.perf_counter() - started, machine=runs[0].machine)
    batches = [batch_row(study_id, config, batch, [r for r in runs if r.global_batch == batch]) for batch in config.batches]
    out = Path(config.out) / ROWS_FILE
    for row in [header, *runs, *batches, *evaluations.values(), *strengths, *comparisons]:
        append_row(out, row)
    print(table(plan, strengths, comparisons))
    return [out]


def table(plan: PowerPlan, strengths: list[BatchSizeStrengthRow], comparisons: list[BatchSizeComparisonRow]) -> str:
    lines = [f"planned minimum detectable difference: {plan.minimum_detectable_difference:.3f} ranks",
             "| framing | global batch | step | samples | mean rank vs 3 rule-based [95% CI, seeds x deals] | seed sd |",
             "|---|---:|---:|---:|---|---:|"]
    for row in strengths:
        low, high = row.mean_rank_ci95
        sd = "" if row.seed_sd is None else f"{row.seed_sd:.3f}"
        lines.append(f"| {row.framing} | {row.global_batch} | {row.step} | {row.samples:,} | "
                     f"{row.mean_rank:.3f} [{low:.3f}, {high:.3f}] | {sd} |")
    for row in comparisons:
        low, high = row.ci95
        what = ("mean rank against three copies of batch " if row.framing == "head to head" else "minus batch ")
        lines.append(f"\n{row.framing}: batch {row.global_batch} {what}{row.versus_batch}"
                     f"{' minus 2.5' if row.framing == 'head to head' else ''}: {row.mean_rank_difference:+.3f} "
                     f"[{low:+.3f}, {high:+.3f}] ({row.seeds} seeds, {row.deals} deals): {row.verdict}")
    return "\n".join(lines)


def preset_config(preset: str, out: Path) -> BatchSizeConfig:
    return BatchSizeConfig(data=str(out / "batch_size_data"), out=str(out), **PRESETS[preset])  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace, out: Path) -> BatchSizeConfig:
    settings = {"data": str(out / "batch_size_data"), **preset_settings(BatchSizeConfig, PRESETS, args)}
    config = BatchSizeConfig(out=str(out), **settings)  # type: ignore[arg-type]
    check(config)
    return config


def rows_files(config: BatchSizeConfig) -> dict[Path, tuple[str, ...]]:
    """The files of rows the study appends to (its own, with the evaluations' rows beside them; its
    bench's), and the kinds of row each holds."""
    own = (BatchSizeSettingsRow, BatchSizeRunRow, BatchSizeBatchRow, MahjongEvalRow, BatchSizeStrengthRow,
           BatchSizeComparisonRow)
    return {Path(config.out) / ROWS_FILE: tuple(row.KIND for row in own),
            Path(config.out) / THROUGHPUT_FILE: (ResultRow.KIND,)}


def check(config: BatchSizeConfig) -> None:
    """Every setting, and the size, target and data its commands get, before anything is written."""
    config.check()
    check_mahjong_settings("batch-size", config.size, (config.target,))
    check_study_data("batch-size", config.data, config.make_data_games, config.data_seed)

