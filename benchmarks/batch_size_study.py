"""Does a larger global batch give a stronger Mahjong policy? The batch-size study.

The study trainspeed follows reports that training at global batch 8192 (8 devices x 1024) made
the policy play clearly better in self-play. This script tests that on one fixed self-play data
set: the same model size and the same number of samples seen at every global batch, the learning
rate tuned per batch (several values around the square-root-scaled one), a warm-up fixed in
samples, several seeds. For each batch it reports validation loss and accuracy at equal samples
(the end of every run) and at equal steps (the step where the largest batch ends), the wall time,
and the playing strength of the best learning rate's policies against three rule-based agents in
duplicate games (`trainspeed eval mahjong`), with 95% intervals clustered by deal, and the
difference to the largest batch deal by deal.

    python benchmarks/batch_size_study.py --data DIR [--size tiny] [--target cpu:eager:fp32] \
        [--nproc 2] [--batches 256,1024,8192] [--samples 131072] [--lr-factors 0.5,1,2] \
        [--seeds 0,1] [--eval-games 1000] [--out docs/results/batch_size_study]

Every training is `trainspeed train` (ranks x per-device batch = the global batch, `--lr` and
`--lr-scaling sqrt`), every evaluation `trainspeed eval mahjong`; a rerun skips finished runs and
evaluations. Writes OUT.jsonl (one row per run, the evaluation rows, one row per batch and the
comparisons), OUT.png and OUT.svg. On a GPU host: `--target cuda:eager:bf16 --nproc 8 --size base`
with larger --samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # this checkout's trainspeed, whatever the environment installed

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.evaluate.stats import clustered_mean  # noqa: E402
from trainspeed.report.plot import save_figure  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item]


def _floats(text: str) -> list[float]:
    return [float(item) for item in text.split(",") if item]


@dataclass(frozen=True)
class StudyConfig:
    data: str
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
    runs_dir: str = "runs/batch_size_study"
    out: str = "results/batch_size_study"
    make_data_games: int = 400
    data_seed: int = 1

    @property
    def equal_steps(self) -> int:
        """Steps of the largest batch: the step at which every run is compared at equal steps."""
        return self.samples // max(self.batches)

    def check(self) -> None:
        for batch in self.batches:
            if batch % self.nproc or self.samples % batch:
                raise SystemExit(f"batch {batch}: must divide --samples {self.samples} and be divisible by --nproc")
            if self.val_samples is not None and self.val_samples % batch:
                raise SystemExit(f"--val-samples {self.val_samples} must be a multiple of batch {batch}")


@dataclass(frozen=True)
class RunSpec:
    batch: int
    lr_factor: float
    seed: int

    @property
    def name(self) -> str:
        return f"b{self.batch}-lr{self.lr_factor:g}-s{self.seed}"


def peak_lr(config: StudyConfig, spec: RunSpec) -> float:
    return config.base_lr * spec.lr_factor * math.sqrt(spec.batch / config.reference_batch)


def run_dir(config: StudyConfig, spec: RunSpec) -> Path:
    return Path(config.runs_dir) / spec.name


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def train_command(config: StudyConfig, spec: RunSpec) -> list[str]:
    steps = config.samples // spec.batch
    warmup = max(1, round(config.warmup_samples / spec.batch))
    command = [
        "trainspeed", "train", "--workload", "mahjong", "--size", config.size, "--data", config.data,
        "--target", config.target, "--nproc", str(config.nproc), "--threads", str(config.threads),
        "--num-workers", str(config.num_workers), "--batch-size-per-device", str(spec.batch // config.nproc),
        "--steps", str(steps), "--seed", str(spec.seed),
        "--lr", f"{config.base_lr * spec.lr_factor:g}", "--lr-scaling", "sqrt",
        "--lr-reference-batch", str(config.reference_batch), "--warmup-steps", str(warmup),
        "--eval-every", str(config.equal_steps), "--log-every", str(max(1, steps // 16)),
        "--out", str(run_dir(config, spec)), "--no-progress",
    ]
    if config.val_samples is not None:
        command += ["--eval-batches", str(config.val_samples // spec.batch)]
    return command


def _python(command: list[str]) -> list[str]:
    return [sys.executable, "-m", "trainspeed", *command[1:]]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def is_trained(config: StudyConfig, spec: RunSpec) -> bool:
    summary = run_dir(config, spec) / "summary.json"
    return summary.exists() and json.loads(summary.read_text())["last_step"] == config.samples // spec.batch


def train(config: StudyConfig, spec: RunSpec) -> float | None:
    """Run one training unless it finished before; its wall seconds (None when skipped)."""
    if is_trained(config, spec):
        return None
    directory = run_dir(config, spec)
    command = train_command(config, spec)
    if directory.exists():
        command.append("--resume")
    print(" ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(_python(command), check=True, cwd=REPO_ROOT, env=child_env())
    return time.perf_counter() - started


def val_rows(config: StudyConfig, spec: RunSpec) -> dict[int, dict[str, Any]]:
    rows = read_jsonl(run_dir(config, spec) / "metrics.jsonl")
    return {row["step"]: row for row in rows if row.get("kind") == "val"}


def run_row(config: StudyConfig, spec: RunSpec, process_s: float | None) -> dict[str, Any]:
    """One training run: validation at equal samples (its end) and at equal steps, and its time."""
    steps = config.samples // spec.batch
    vals = val_rows(config, spec)
    summary = json.loads((run_dir(config, spec) / "summary.json").read_text())
    final, at_equal_steps = vals[steps], vals[config.equal_steps]
    return {
        "kind": "batch-study-run", "run": spec.name, "run_dir": str(run_dir(config, spec)),
        "global_batch": spec.batch, "nproc": config.nproc, "batch_size_per_device": spec.batch // config.nproc,
        "lr_factor": spec.lr_factor, "peak_lr": peak_lr(config, spec), "seed": spec.seed, "steps": steps,
        "warmup_steps": max(1, round(config.warmup_samples / spec.batch)), "samples": config.samples,
        "val_loss": final["loss"], "val_accuracy": final["accuracy"], "majority_baseline": final["majority_baseline"],
        "val_samples": final["samples"],
        "equal_steps": config.equal_steps, "equal_steps_samples": config.equal_steps * spec.batch,
        "equal_steps_val_loss": at_equal_steps["loss"], "equal_steps_val_accuracy": at_equal_steps["accuracy"],
        "curve": [[step * spec.batch, row["loss"], row["accuracy"]] for step, row in sorted(vals.items())],
        "train_wall_s": summary["wall_s"] + summary["paused_s"], "process_s": process_s,
        "end_to_end_samples_per_s": summary["end_to_end_samples_per_s"],
        "command": " ".join(train_command(config, spec)),
    }


def eval_out(config: StudyConfig, spec: RunSpec) -> Path:
    return Path(config.runs_dir) / "evals" / f"{spec.name}.jsonl"


def eval_command(config: StudyConfig, spec: RunSpec) -> list[str]:
    return ["trainspeed", "eval", "mahjong", "--policy", str(run_dir(config, spec)), "--opponent", "rule-based",
            "--games", str(config.eval_games), "--seed", str(config.eval_seed), "--target", config.target,
            "--threads", str(config.threads), "--batch-games", str(config.eval_batch_games),
            "--out", str(eval_out(config, spec)), "--no-progress", "--no-plot"]


def evaluated_row(config: StudyConfig, spec: RunSpec) -> dict[str, Any] | None:
    rows = [row for row in read_jsonl(eval_out(config, spec))
            if row.get("games") == config.eval_games and row.get("seed") == config.eval_seed]
    return rows[-1] if rows else None


def evaluate(config: StudyConfig, spec: RunSpec) -> dict[str, Any]:
    if evaluated_row(config, spec) is None:
        command = eval_command(config, spec)
        print(" ".join(command), flush=True)
        subprocess.run(_python(command), check=True, cwd=REPO_ROOT, env=child_env())
    row = evaluated_row(config, spec)
    assert row is not None
    return {**row, "study_run": spec.name, "global_batch": spec.batch, "lr_factor": spec.lr_factor, "seed": spec.seed}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def pooled_clusters(evals: list[dict[str, Any]]) -> list[list[int]]:
    """Per deal, every game of it over the given evaluations (they played the same deals)."""
    return [sum((row["deal_ranks"][deal] for row in evals), []) for deal in range(evals[0]["deals"])]


def batch_row(config: StudyConfig, batch: int, runs: list[dict[str, Any]], evals: list[dict[str, Any]]) -> dict[str, Any]:
    """One global batch: its best learning rate (lowest mean final validation loss over seeds) and
    that LR's validation metrics, wall time and playing strength pooled over the seeds."""
    by_factor: dict[float, list[dict[str, Any]]] = {}
    for row in runs:
        by_factor.setdefault(row["lr_factor"], []).append(row)
    best = min(by_factor, key=lambda factor: _mean([row["val_loss"] for row in by_factor[factor]]))
    chosen = by_factor[best]
    strength = clustered_mean(pooled_clusters(evals), bounds=(1.0, 4.0))
    return {
        "kind": "batch-study-batch", "global_batch": batch, "best_lr_factor": best, "peak_lr": chosen[0]["peak_lr"],
        "steps": chosen[0]["steps"], "seeds": [row["seed"] for row in chosen],
        "lr_sweep": {f"{factor:g}": _mean([row["val_loss"] for row in rows]) for factor, rows in sorted(by_factor.items())},
        "val_loss": _mean([row["val_loss"] for row in chosen]),
        "val_loss_per_seed": [row["val_loss"] for row in chosen],
        "val_accuracy": _mean([row["val_accuracy"] for row in chosen]),
        "val_accuracy_per_seed": [row["val_accuracy"] for row in chosen],
        "majority_baseline": chosen[0]["majority_baseline"],
        "equal_steps": config.equal_steps,
        "equal_steps_val_loss": _mean([row["equal_steps_val_loss"] for row in chosen]),
        "equal_steps_val_accuracy": _mean([row["equal_steps_val_accuracy"] for row in chosen]),
        "train_wall_s": _mean([row["train_wall_s"] for row in chosen]),
        "eval_games": sum(row["games"] for row in evals),
        "mean_rank": strength.mean, "mean_rank_ci95": list(strength.ci95) if strength.ci95 else None,
        "mean_rank_ci95_half_width": strength.half_width,
        "mean_rank_per_seed": [row["mean_rank"] for row in evals],
        "mean_rank_ci95_per_seed": [row["mean_rank_ci95"] for row in evals],
        "mean_rank_ci95_half_width_per_seed": [row["mean_rank_ci95_half_width"] for row in evals],
        "mean_score_delta": _mean([row["mean_score_delta"] for row in evals]),
    }


def comparison_row(largest: int, other: int, evals: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Mean rank of the largest batch minus that of `other`, deal by deal (both pooled over seeds):
    below zero, the largest batch played better on the same walls."""
    big, small = pooled_clusters(evals[largest]), pooled_clusters(evals[other])
    differences = [[_mean(b) - _mean(s)] for b, s in zip(big, small)]
    result = clustered_mean(differences)
    return {"kind": "batch-study-comparison", "global_batch": largest, "versus_batch": other,
            "mean_rank_difference": result.mean, "ci95": list(result.ci95) if result.ci95 else None,
            "deals": result.clusters}


def plot(config: StudyConfig, runs: list[dict[str, Any]], batches: list[dict[str, Any]], stem: Path) -> list[Path]:
    figure, (curve_axes, sweep_axes, rank_axes) = plt.subplots(1, 3, figsize=(16, 4.6), constrained_layout=True)
    for batch in batches:
        chosen = [row for row in runs if row["global_batch"] == batch["global_batch"]
                  and row["lr_factor"] == batch["best_lr_factor"]]
        points = sorted({point[0] for row in chosen for point in row["curve"]})
        losses = [_mean([p[1] for row in chosen for p in row["curve"] if p[0] == x]) for x in points]
        line, = curve_axes.plot(points, losses, marker=".", label=f"batch {batch['global_batch']} (lr x{batch['best_lr_factor']:g})")
        equal = config.equal_steps * batch["global_batch"]
        curve_axes.plot([equal], [batch["equal_steps_val_loss"]], "s", color=line.get_color(), markersize=8,
                        markerfacecolor="none")
        factors = sorted(float(factor) for factor in batch["lr_sweep"])
        sweep_axes.plot(factors, [batch["lr_sweep"][f"{factor:g}"] for factor in factors], marker="o",
                        color=line.get_color(), label=f"batch {batch['global_batch']}")
    curve_axes.set(xlabel="samples seen", ylabel="validation NLL (best LR, mean over seeds)", xscale="log",
                   title=f"Learning curves (square: step {config.equal_steps}, equal steps)")
    sweep_axes.set(xlabel="LR / square-root-scaled LR", ylabel=f"validation NLL after {config.samples:,} samples",
                   xscale="log", title="Learning-rate sweep (mean over seeds)")
    sweep_axes.set_xticks(config.lr_factors, [f"{factor:g}" for factor in config.lr_factors])
    sweep_axes.minorticks_off()
    labels = [str(batch["global_batch"]) for batch in batches]
    for position, batch in enumerate(batches):
        low, high = batch["mean_rank_ci95"] or (batch["mean_rank"], batch["mean_rank"])
        rank_axes.errorbar([position], [batch["mean_rank"]], yerr=[[batch["mean_rank"] - low], [high - batch["mean_rank"]]],
                           fmt="o", color="black", capsize=5)
        rank_axes.annotate(f"{batch['mean_rank']:.3f}", (position, batch["mean_rank"]), xytext=(8, 0),
                           textcoords="offset points", va="center", fontsize=8)
    rank_axes.axhline(2.5, color="grey", linestyle="--", linewidth=0.8)
    rank_axes.set_xticks(range(len(batches)), labels)
    rank_axes.set(xlabel="global batch", ylabel="mean rank vs 3 rule-based (95% CI, by deal)",
                  title=f"Playing strength ({batches[0]['eval_games']} games per batch)")
    for axes in (curve_axes, sweep_axes, rank_axes):
        axes.grid(True, alpha=0.3)
    curve_axes.legend(fontsize=8)
    sweep_axes.legend(fontsize=8)
    figure.suptitle(f"Batch-size study: mahjong/{config.size}, {config.samples:,} samples per run, {config.target}")
    return save_figure(figure, stem, dpi=110)


def table(batches: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> str:
    lines = [
        "| global batch | steps | best LR (peak) | val NLL / acc, equal samples | val NLL / acc, equal steps | train wall s "
        "| mean rank vs rule-based [95% CI] | games |",
        "|---:|---:|---|---|---|---:|---|---:|",
    ]
    for batch in batches:
        low, high = batch["mean_rank_ci95"] or (math.nan, math.nan)
        lines.append(
            f"| {batch['global_batch']} | {batch['steps']} | x{batch['best_lr_factor']:g} ({batch['peak_lr']:.2g}) "
            f"| {batch['val_loss']:.4f} / {batch['val_accuracy']:.2%} "
            f"| {batch['equal_steps_val_loss']:.4f} / {batch['equal_steps_val_accuracy']:.2%} "
            f"| {batch['train_wall_s']:.0f} | {batch['mean_rank']:.3f} [{low:.3f}, {high:.3f}] | {batch['eval_games']} |")
    for row in comparisons:
        low, high = row["ci95"] or (math.nan, math.nan)
        lines.append(f"\nbatch {row['global_batch']} minus batch {row['versus_batch']}: mean rank "
                     f"{row['mean_rank_difference']:+.3f} [{low:+.3f}, {high:+.3f}] over {row['deals']} deals")
    return "\n".join(lines)


def make_data(config: StudyConfig) -> None:
    if (Path(config.data) / "index.json").exists():
        return
    command = ["trainspeed", "data", "mahjong-selfplay", "--games", str(config.make_data_games), "--workers", "2",
               "--out", config.data, "--seed", str(config.data_seed), "--no-progress"]
    print(" ".join(command), flush=True)
    subprocess.run(_python(command), check=True, cwd=REPO_ROOT, env=child_env())


def parse_args() -> tuple[StudyConfig, bool]:
    defaults = StudyConfig(data="")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="self-play shards; made here when missing")
    parser.add_argument("--size", default=defaults.size)
    parser.add_argument("--target", default=defaults.target)
    parser.add_argument("--nproc", type=int, default=defaults.nproc, help="ranks of every run")
    parser.add_argument("--threads", type=int, default=defaults.threads, help="torch threads per rank and per evaluation")
    parser.add_argument("--num-workers", type=int, default=defaults.num_workers)
    parser.add_argument("--batches", type=_ints, default=defaults.batches, help="global batches")
    parser.add_argument("--samples", type=int, default=defaults.samples, help="samples seen by every run")
    parser.add_argument("--base-lr", type=float, default=defaults.base_lr)
    parser.add_argument("--reference-batch", type=int, default=defaults.reference_batch)
    parser.add_argument("--lr-factors", type=_floats, default=defaults.lr_factors)
    parser.add_argument("--warmup-samples", type=int, default=defaults.warmup_samples)
    parser.add_argument("--seeds", type=_ints, default=defaults.seeds)
    parser.add_argument("--val-samples", type=int, default=None, help="cap per validation pass (default: whole split)")
    parser.add_argument("--eval-games", type=int, default=defaults.eval_games, help="games per evaluated policy")
    parser.add_argument("--eval-seed", type=int, default=defaults.eval_seed)
    parser.add_argument("--eval-parallel", type=int, default=defaults.eval_parallel, help="evaluations at once")
    parser.add_argument("--eval-batch-games", type=int, default=defaults.eval_batch_games)
    parser.add_argument("--runs-dir", default=defaults.runs_dir)
    parser.add_argument("--out", default=defaults.out, help="output stem: OUT.jsonl, OUT.png, OUT.svg")
    parser.add_argument("--make-data-games", type=int, default=defaults.make_data_games)
    parser.add_argument("--data-seed", type=int, default=defaults.data_seed)
    parser.add_argument("--plot-only", action="store_true", help="redraw OUT.png/.svg and the table from OUT.jsonl")
    args = parser.parse_args()
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(StudyConfig)}
    values.update(batches=tuple(args.batches), lr_factors=tuple(args.lr_factors), seeds=tuple(args.seeds))
    return StudyConfig(**values), args.plot_only


def replot(config: StudyConfig) -> int:
    """Figures and table again from OUT.jsonl (its settings, not the flags, decide what they show)."""
    rows = read_jsonl(Path(config.out).with_suffix(".jsonl"))
    header = next(row for row in rows if row["kind"] == "batch-study-config")
    fields = {field.name for field in dataclasses.fields(StudyConfig)}
    recorded = StudyConfig(**{key: tuple(value) if isinstance(value, list) else value
                              for key, value in header.items() if key in fields})
    runs = [row for row in rows if row["kind"] == "batch-study-run"]
    batches = [row for row in rows if row["kind"] == "batch-study-batch"]
    comparisons = [row for row in rows if row["kind"] == "batch-study-comparison"]
    paths = plot(recorded, runs, batches, Path(config.out))
    print(table(batches, comparisons))
    print("\n".join(str(path) for path in paths))
    return 0


def main() -> int:
    config, plot_only = parse_args()
    if plot_only:
        return replot(config)
    config.check()
    started = time.perf_counter()
    make_data(config)
    specs = [RunSpec(batch, factor, seed) for batch in config.batches for seed in config.seeds
             for factor in config.lr_factors]
    runs = []
    for spec in specs:
        process_s = train(config, spec)
        runs.append(run_row(config, spec, process_s))
    trained_s = time.perf_counter() - started
    best: dict[int, float] = {}
    for batch in config.batches:
        rows = [row for row in runs if row["global_batch"] == batch]
        best[batch] = min(config.lr_factors, key=lambda f: _mean([r["val_loss"] for r in rows if r["lr_factor"] == f]))
    to_evaluate = [RunSpec(batch, best[batch], seed) for batch in config.batches for seed in config.seeds]
    with ThreadPoolExecutor(max_workers=config.eval_parallel) as pool:
        evals = list(pool.map(lambda spec: evaluate(config, spec), to_evaluate))
    by_batch = {batch: [row for row in evals if row["global_batch"] == batch] for batch in config.batches}
    batches = [batch_row(config, batch, [r for r in runs if r["global_batch"] == batch], by_batch[batch])
               for batch in config.batches]
    largest = max(config.batches)
    comparisons = [comparison_row(largest, batch, by_batch) for batch in config.batches if batch != largest]
    stem = Path(config.out)
    header = {"kind": "batch-study-config", **dataclasses.asdict(config), "equal_steps": config.equal_steps,
              "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
              "train_s": trained_s, "total_s": time.perf_counter() - started}
    atomic_write_text(stem.with_suffix(".jsonl"),
                      "".join(json.dumps(row) + "\n" for row in [header, *runs, *evals, *batches, *comparisons]))
    paths = plot(config, runs, batches, stem)
    print(table(batches, comparisons))
    print("\n".join(str(path) for path in [stem.with_suffix(".jsonl"), *paths]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
