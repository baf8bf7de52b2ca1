"""The gradient noise scale at one checkpoint, from every per-sample gradient, beside the run's own.

    PYTHONPATH=examples python benchmarks/noise_scale_brute_force.py RUN --step S --out check.jsonl

`trainspeed train` estimates |G|^2 and tr(Sigma) from the squared norms of two batch sizes
(`trainspeed.gradients.noise_scale`). This measures them directly at the weights of the checkpoint
RUN/checkpoints/step-S.pt: n training samples (`--samples`, drawn by the run's own loader,
shuffled with `--seed`), each one's gradient of its own loss (torch.func: functional_call under
vmap(grad), `--chunk` samples at a time, the networks in train mode as in training), and from
their sums in float64

    G_hat     = mean g_i
    tr(Sigma) = sum |g_i - G_hat|^2 / (n - 1)
    |G|^2     = |G_hat|^2 - tr(Sigma) / n      (unbiased: E|G_hat|^2 = |G|^2 + tr(Sigma) / n)
    B_simple  = tr(Sigma) / |G|^2

with delete-one-block jackknife standard errors over `--blocks` equal blocks of the samples. A
sample is what the workload's loss averages over (a Mahjong decision, a char-LM window), as in
training, where the batch loss is the mean of the samples' losses.

The run's value compared is fixed before any comparison, as the value the run itself tells a
reader to read: the moving averages (`grad_sq_avg`, `trace_sigma_avg`, `b_simple_avg`) of the
`noise-scale` row logged at step S, the row closed by the same step the checkpoint was written
after. Those averages weigh the last steps most (smoothing s: the step j back weighs s^j), so
they describe the weights of the last ~1/(1-s) steps; the comparison is fair where the weights
barely moved over those steps, hence a checkpoint at the end of a run whose cosine schedule has
decayed the learning rate (`--min-lr-ratio`) and a smoothing whose span lies inside that tail
(`--noise-scale-smoothing`). The row's window values (a plain mean over its `window_steps`) are
recorded beside it, not compared: one window is a few steps and too noisy to judge by.

Near convergence the true |G|^2 can be within its noise of 0, and B_simple is then no number, here
as in training. Both sides are read by the same criterion (`trainspeed.gradients.rows`): |G|^2 is
resolved where it exceeds 2 standard errors (here the jackknife's; in training the row's
`grad_sq_avg_se`), and an unresolved side has no `b_simple`, only `b_simple_lower`, a lower bound
(and no `ratio_b_simple`). `agreement` says how the two readings meet: both resolved (compare the
ratios), both unresolved, or one only, and then whether an in-training lower bound lies below the
brute-force value, as a bound must.

One `measurement` row per (run, step, network) goes to `--out` (a JSONL file; a row of the same
run, step and network is replaced), written atomically. Bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.func import functional_call, grad, vmap  # noqa: E402

from trainspeed.atomic import atomic_write_text  # noqa: E402
from trainspeed.bench.measurement import MeasurementRow  # noqa: E402
from trainspeed.data.base import Batch, LoaderConfig  # noqa: E402
from trainspeed.errors import UsageError  # noqa: E402
from trainspeed.gradients.rows import NoiseScaleReading, assess, bound_text  # noqa: E402
from trainspeed.machine import Machine  # noqa: E402
from trainspeed.rows import row_record  # noqa: E402
from trainspeed.train.checkpoint import checkpoint_dir, checkpoint_name, load_checkpoint  # noqa: E402
from trainspeed.train.config import TrainConfig  # noqa: E402
from trainspeed.user_json import JSONRefused, loads  # noqa: E402
from trainspeed.workloads import get_workload  # noqa: E402
from trainspeed.workloads.base import Trainable  # noqa: E402

BENCHMARK = "noise-scale-check"
"""The `benchmark` of this script's `measurement` rows."""
COMPARED = "moving averages of the noise-scale row at the checkpoint's step"

Network = Callable[..., Any]
SampleLoss = Callable[[Network, Batch], torch.Tensor]
"""The loss of a batch of one sample, as the workload's `train_step` computes it, through `network`
(the trained network called with the parameters being differentiated)."""


def mahjong_loss(network: Network, batch: Batch) -> torch.Tensor:
    _, loss = network(batch["features"], batch["mask"], batch["action"])
    return loss


def char_lm_loss(network: Network, batch: Batch) -> torch.Tensor:
    tokens = batch["tokens"].long()
    logits = network(tokens[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def least_squares_loss(network: Network, batch: Batch) -> torch.Tensor:
    return 0.5 * (network(batch["x"]).squeeze(1) - batch["y"]).pow(2).mean()


SAMPLE_LOSSES: dict[str, SampleLoss] = {"mahjong": mahjong_loss, "charlm": char_lm_loss,
                                        "least-squares": least_squares_loss}
"""Per workload `name`: each trains one network whose batch loss is the mean of these."""


@dataclass(frozen=True)
class Sums:
    """Sums over samples: of the gradients (float64, flat) and of their squared norms."""

    count: int
    gradient: torch.Tensor
    squared: float

    def __sub__(self, other: "Sums") -> "Sums":
        return Sums(self.count - other.count, self.gradient - other.gradient, self.squared - other.squared)


@dataclass(frozen=True)
class Estimate:
    grad_sq: float
    trace_sigma: float

    @property
    def b_simple(self) -> float | None:
        return self.trace_sigma / self.grad_sq if self.grad_sq > 0 else None


def estimate(sums: Sums) -> Estimate:
    n = sums.count
    mean_sq = float(sums.gradient.dot(sums.gradient)) / n**2
    trace_sigma = (sums.squared - n * mean_sq) / (n - 1)
    return Estimate(grad_sq=mean_sq - trace_sigma / n, trace_sigma=trace_sigma)


def jackknife_se(values: list[float]) -> float:
    """The delete-one-block jackknife's standard error from the estimates without each block."""
    blocks = len(values)
    mean = sum(values) / blocks
    return math.sqrt((blocks - 1) / blocks * sum((value - mean) ** 2 for value in values))


@dataclass(frozen=True)
class BruteForce:
    estimate: Estimate
    grad_sq_se: float
    trace_sigma_se: float
    b_simple_se: float | None
    samples: int
    blocks: int
    seconds: float


def brute_force(blocks: list[Sums], seconds: float) -> BruteForce:
    total = blocks[0]
    for block in blocks[1:]:
        total = Sums(total.count + block.count, total.gradient + block.gradient, total.squared + block.squared)
    without = [estimate(total - block) for block in blocks]
    ratios = [value.b_simple for value in without]
    return BruteForce(
        estimate=estimate(total), grad_sq_se=jackknife_se([value.grad_sq for value in without]),
        trace_sigma_se=jackknife_se([value.trace_sigma for value in without]),
        b_simple_se=jackknife_se(ratios) if None not in ratios else None,  # type: ignore[arg-type]
        samples=total.count, blocks=len(blocks), seconds=seconds)


def per_sample_gradients(network: nn.Module, loss: SampleLoss) -> Callable[[Batch], torch.Tensor]:
    """A function from a batch to its samples' flat gradients, (samples, parameters)."""
    parameters = {name: value.detach() for name, value in network.named_parameters()}
    buffers = {name: value.detach() for name, value in network.named_buffers()}

    def one_sample(params: dict[str, torch.Tensor], sample: Batch) -> torch.Tensor:
        batch = {key: value.unsqueeze(0) for key, value in sample.items()}
        return loss(lambda *args: functional_call(network, (params, buffers), args), batch)

    # "different": a network with dropout draws each sample's mask, as a batch in training does.
    gradients = vmap(grad(one_sample), in_dims=(None, 0), randomness="different")

    def flat(batch: Batch) -> torch.Tensor:
        per_parameter = gradients(parameters, batch)
        return torch.cat([per_parameter[name].reshape(len(per_parameter[name]), -1) for name in parameters], dim=1)

    return flat


def sample_batches(loader: Any, chunk: int, samples: int) -> Iterator[Batch]:
    """`samples // chunk` batches of `chunk` samples from the loader, over epochs if need be."""
    wanted, epoch = samples // chunk, 0
    while wanted:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        for batch in loader:
            yield batch
            wanted -= 1
            if not wanted:
                return
        epoch += 1


def measure(network: nn.Module, loss: SampleLoss, batches: Iterator[Batch], block_count: int,
            chunks: int) -> BruteForce:
    started = time.perf_counter()
    gradients = per_sample_gradients(network, loss)
    blocks: list[Sums] = []
    for index, batch in enumerate(batches):
        g = gradients(batch).double()
        chunk_sums = Sums(len(g), g.sum(dim=0), float(g.pow(2).sum()))
        if index * block_count // chunks == len(blocks):
            blocks.append(chunk_sums)
        else:
            last = blocks[-1]
            blocks[-1] = Sums(last.count + chunk_sums.count, last.gradient + chunk_sums.gradient,
                              last.squared + chunk_sums.squared)
    return brute_force(blocks, time.perf_counter() - started)


# --- the run -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InTraining:
    method: str
    small_batch: int
    big_batch: int
    grad_sq: float
    trace_sigma: float
    b_simple: float | None
    window_grad_sq: float
    window_trace_sigma: float
    window_b_simple: float | None
    window_steps: int
    resolved: bool | None
    """Whether the row's |G|^2 average was above 2 standard errors (None: a row written before)."""
    grad_sq_se: float | None
    b_simple_lower: float | None


def noise_scale_row(run: Path, step: int, network: str) -> InTraining:
    """The last `noise-scale` row of `network` logged at `step` (a resumed run may log it twice)."""
    path = run / "metrics.jsonl"
    if not path.is_file():
        raise UsageError(f"{run}: no metrics.jsonl; give a trainspeed train run directory")
    rows, logged = [], set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = loads(line)
        except JSONRefused:
            continue
        if isinstance(row, dict) and row.get("kind") == "noise-scale" and row.get("network") == network:
            logged.add(row.get("step"))
            if row.get("step") == step:
                rows.append(row)
    if not rows:
        near = sorted(logged, key=lambda s: abs(s - step))[:3] if logged else []
        raise UsageError(f"{path}: no noise-scale row of {network} at step {step} (rows at: "
                         f"{', '.join(map(str, sorted(near))) or 'none'}); check the step a row was logged at")
    row = rows[-1]
    return InTraining(method=row["method"], small_batch=row["small_batch"], big_batch=row["big_batch"],
                      grad_sq=row["grad_sq_avg"], trace_sigma=row["trace_sigma_avg"], b_simple=row["b_simple_avg"],
                      window_grad_sq=row["grad_sq"], window_trace_sigma=row["trace_sigma"],
                      window_b_simple=row["b_simple"], window_steps=row["window_steps"],
                      resolved=row.get("resolved"), grad_sq_se=row.get("grad_sq_avg_se"),
                      b_simple_lower=row.get("b_simple_lower"))


def load_run(run: Path, step: int) -> tuple[TrainConfig, dict[str, Any]]:
    if not run.is_dir():
        raise UsageError(f"{run}: no such run directory")
    path = checkpoint_dir(run) / checkpoint_name(step)
    if not path.is_file():
        steps = sorted(p.name for p in checkpoint_dir(run).glob("step-*.pt")) if checkpoint_dir(run).is_dir() else []
        raise UsageError(f"{run}: no checkpoint of step {step} (it has: {', '.join(steps) or 'none'})")
    payload = load_checkpoint(path)
    return TrainConfig.from_json(payload["config"], str(path)), payload


def trained_network(workload: Any, config: TrainConfig, payload: dict[str, Any]) -> tuple[str, nn.Module]:
    trainable: Trainable = workload.build(config.size, config.seed)
    names = trainable.trained_network_names()
    if len(names) != 1:
        raise UsageError(f"{config.workload}: trains {len(names)} networks; this check takes one")
    name = names[0]
    network = trainable.networks[name]
    network.load_state_dict(payload["trainable"]["networks"][name])
    return name, network.train()


def agreement(in_training: InTraining, brute: NoiseScaleReading) -> str:
    """How the in-training reading meets the brute-force one, each resolved or a lower bound only."""
    if in_training.resolved is None:
        return "not assessed in training (a row written before the meter kept a standard error)"
    if in_training.resolved and brute.resolved:
        return "both resolved"
    if not in_training.resolved and not brute.resolved:
        return "both unresolved"
    if in_training.resolved:
        return "resolved in training only: brute force finds |G|^2 within its noise of 0"
    bound = in_training.b_simple_lower
    if bound is None or brute.value is None:
        return "resolved by brute force only: training gave no lower bound"
    held = "holds" if brute.value >= bound else "fails"
    return (f"resolved by brute force only: the lower bound in training {held} "
            f"(brute force {brute.value:.4g}, bound {bound:.4g})")


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def check_row(args: argparse.Namespace, argv: list[str], machine: Machine) -> dict[str, Any]:
    config, payload = load_run(args.run, args.step)
    workload = get_workload(config.workload)
    loss = SAMPLE_LOSSES.get(workload.name)
    if loss is None:
        raise UsageError(f"{config.workload}: no per-sample loss for workload {workload.name!r} here "
                         f"(known: {', '.join(SAMPLE_LOSSES)})")
    name, network = trained_network(workload, config, payload)
    in_training = noise_scale_row(args.run, args.step, name)
    data = args.data or config.data
    if data is None:
        raise UsageError(f"{args.run}: trained on synthetic data; give --data")
    loader = workload.open_dataset(data, config.size, LoaderConfig(
        batch_size=args.chunk, split="train", seed=args.seed, shuffle=True, num_workers=0, drop_last=True))
    result = measure(network, loss, sample_batches(loader, args.chunk, args.samples), args.blocks,
                     args.samples // args.chunk)
    value = result.estimate
    reading = assess(value.grad_sq, value.trace_sigma, result.grad_sq_se)
    values = {
        "workload": workload.name, "workload_spec": config.workload, "size": config.size, "network": name,
        "run": str(args.run), "step": args.step, "data": str(data), "seed": args.seed,
        "samples_used": result.samples, "jackknife_blocks": result.blocks,
        "grad_sq": value.grad_sq, "trace_sigma": value.trace_sigma, "b_simple": reading.value,
        "resolved": reading.resolved, "b_simple_lower": reading.lower_bound,
        "grad_sq_se": result.grad_sq_se, "trace_sigma_se": result.trace_sigma_se, "b_simple_se": result.b_simple_se,
        "in_training_compared": COMPARED, "in_training_method": in_training.method,
        "in_training_small_batch": in_training.small_batch, "in_training_big_batch": in_training.big_batch,
        "in_training_smoothing": config.noise_scale_smoothing,
        "in_training_grad_sq": in_training.grad_sq, "in_training_trace_sigma": in_training.trace_sigma,
        "in_training_b_simple": in_training.b_simple, "in_training_resolved": in_training.resolved,
        "in_training_grad_sq_se": in_training.grad_sq_se, "in_training_b_simple_lower": in_training.b_simple_lower,
        "window_grad_sq": in_training.window_grad_sq, "window_trace_sigma": in_training.window_trace_sigma,
        "window_b_simple": in_training.window_b_simple, "window_steps": in_training.window_steps,
        "ratio_grad_sq": ratio(in_training.grad_sq, value.grad_sq),
        "ratio_trace_sigma": ratio(in_training.trace_sigma, value.trace_sigma),
        "ratio_b_simple": ratio(in_training.b_simple, reading.value), "agreement": agreement(in_training, reading),
        "train_steps": config.steps, "train_batch_size_per_device": config.batch_size_per_device,
        "train_world_size": config.world_size, "train_micro_batches": config.noise_scale_micro_batches,
        "train_min_lr_ratio": config.lr.min_lr_ratio, "train_seed": config.seed,
        "seconds": result.seconds, "threads": torch.get_num_threads(), "torch_version": torch.__version__,
    }
    command = shlex.join(["python", "benchmarks/noise_scale_brute_force.py", *argv])
    return row_record(MeasurementRow.of(BENCHMARK, values, command, machine.at_end()))


def write_row(path: Path, row: dict[str, Any]) -> None:
    """Replace the file with its rows of other (benchmark, run, step, network) and this one, atomically."""

    def key(record: Any) -> tuple[Any, ...] | None:
        if not isinstance(record, dict) or not isinstance(record.get("values"), dict):
            return None
        values = record["values"]
        return record.get("benchmark"), values.get("run"), values.get("step"), values.get("network")

    kept = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                old = loads(line)
            except JSONRefused:
                old = None
            if key(old) != key(row):
                kept.append(line)
    kept.append(json.dumps(row, sort_keys=True))
    atomic_write_text(path, "\n".join(kept) + "\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a trainspeed train run directory")
    parser.add_argument("--step", type=int, required=True, help="the checkpoint's step")
    parser.add_argument("--samples", type=int, default=4096, help="training samples to take (default: 4096)")
    parser.add_argument("--chunk", type=int, default=128, help="samples per vmap call (default: 128)")
    parser.add_argument("--blocks", type=int, default=32, help="jackknife blocks (default: 32)")
    parser.add_argument("--seed", type=int, default=0, help="the loader's shuffle seed (default: 0)")
    parser.add_argument("--data", help="dataset directory (default: the run's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--out", type=Path, required=True, help="JSONL file the row goes to")
    args = parser.parse_args(argv)
    chunks = args.samples // args.chunk if args.chunk > 0 else 0
    if args.chunk < 1 or args.samples % args.chunk or not 2 <= args.blocks <= chunks:
        parser.error(f"--samples {args.samples} must be a multiple of --chunk {args.chunk}, in at least "
                     f"--blocks {args.blocks} (>= 2) chunks")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    machine = Machine.at_start()
    try:
        row = check_row(args, argv, machine)
    except UsageError as error:
        print(f"noise_scale_brute_force: {error}", file=sys.stderr)
        return 2
    write_row(args.out, row)
    row = row["values"]
    brute = bound_text(row["b_simple"], row["b_simple_lower"], "{:.4g}")
    in_training = bound_text(row["in_training_b_simple"], row["in_training_b_simple_lower"], "{:.4g}")
    print(f"{row['workload']} {row['size']} step {row['step']}: brute force |G|^2 {row['grad_sq']:.4g} "
          f"tr(Sigma) {row['trace_sigma']:.4g} B_simple {brute} over {row['samples_used']} samples; "
          f"in training {row['in_training_grad_sq']:.4g} {row['in_training_trace_sigma']:.4g} {in_training} "
          f"(ratios {row['ratio_grad_sq']}, {row['ratio_trace_sigma']}, {row['ratio_b_simple']}); {row['agreement']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
