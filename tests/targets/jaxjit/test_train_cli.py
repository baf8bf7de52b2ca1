"""`trainspeed train --target jax:jit:fp32` trains as `--target cpu:eager:fp32` does: the same
losses at the same logged steps, for Mahjong and for the tests' own toy workload; a step over
micro-batches runs as a program of its own, so the noise scale over micro-batches, auto and a
memory cap's micro-batches give the eager run's losses, noise-scale rows and batch switches; without
micro-batches the noise scale is not measured (the gradients stay inside the compiled JAX step),
which the run says in one line and trains on; and a run stopped at a checkpoint and resumed ends
where an uninterrupted run ends.

Each `train` runs in this process (one rank, no loader workers, synthetic data: no child process),
so the JAX program is traced and compiled once per run without an interpreter's start.

Tolerance: relative 1e-4 on each logged loss. Both targets run the same float32 network, loss and
AdamW/SGD update, but XLA's kernels and ATen's sum in other orders (and XLA fuses ops ATen does one
at a time), so each step's parameters differ by float32 rounding (~1e-7 relative) and the
difference grows a little step by step; we observed agreement to ~7 digits over 12 steps on
Mahjong (1e-7 relative) and bit-equal losses on the toy. A step that drops the update, applies it
twice or trains another model is off by far more: the logged Mahjong losses fall by ~2.3% over the
run (230 tolerances), the toy's by ~2.6%, and with a learning rate of ~0 the first logged loss is
already 1e-3 (Mahjong) and 6e-3 (toy) off the trained one, 10 and 60 tolerances.

A resumed run is compared with the uninterrupted one at relative 1e-6: both run the same compiled
program on the same state from the same checkpointed numbers, so they agree to the bit (observed),
and the tolerance only leaves room for a platform whose XLA reorders a sum between compilations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.long,  # minutes in all: started first (tests/conftest.py)
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    # JAX without x64 holds Mahjong's int64 index tensors as int32 (their values fit), and says so.
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

RELATIVE = 1e-4
RUN = ["--synthetic-data", "--batch-size-per-device", "16", "--log-every", "4", "--no-progress", "--threads", "1",
       "--num-workers", "0"]
"""The brief's command (12 steps of 16, a train row every 4 steps), in this process: no loader
workers (synthetic batches need none)."""
UNBATCHED = [arg for arg in RUN if arg not in ("--batch-size-per-device", "16")]
"""`RUN` without its batch, for runs whose schedule names theirs."""
WORKLOADS = {
    "mahjong": ["--workload", "mahjong", "--size", "tiny"],
    "toy": ["--workload", "toy_workload:ToyWorkload", "--size", "tiny"],  # tests/ is on the session's path
}
NOT_MEASURED = ("train: the gradient noise scale is not measured on jax:jit:fp32: its gradients stay inside its "
                "compiled JAX step; its own step measures it over micro-batches: give --noise-scale-micro-batches 2 "
                "(or more)")


def rows(run_dir: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if row.get("kind") == kind]


def train(capsys: pytest.CaptureFixture, *args: str) -> str:
    """`trainspeed train ARGS...` in this process, asserting it succeeded; returns its stdout."""
    code = main(["train", *args])
    printed = capsys.readouterr()
    assert code == 0, printed.out[-3000:] + printed.err[-3000:]
    return printed.out


def logged_losses(run_dir: Path) -> list[tuple[int, float]]:
    return [(row["step"], row["loss"]) for row in rows(run_dir, "train")]


@pytest.mark.slow
@pytest.mark.parametrize("workload", WORKLOADS)
def test_train_on_jax_logs_the_losses_of_eager_pytorch_at_the_same_steps(
        workload: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    runs = {}
    for target in ("cpu:eager:fp32", "jax:jit:fp32"):
        runs[target] = tmp_path / target.replace(":", "-")
        train(capsys, *WORKLOADS[workload], *RUN, "--target", target, "--steps", "12", "--noise-scale", "off",
              "--out", str(runs[target]))
    eager, traced = (logged_losses(runs[target]) for target in ("cpu:eager:fp32", "jax:jit:fp32"))

    assert [step for step, _ in eager] == [step for step, _ in traced] == [4, 8, 12]
    # the run learns: equal losses mean equal updates, not a model that never moved
    assert eager[-1][1] < eager[0][1] * (1 - 100 * RELATIVE), eager
    assert [loss for _, loss in traced] == pytest.approx([loss for _, loss in eager], rel=RELATIVE), (traced, eager)
    summaries = {target: json.loads((run / "summary.json").read_text()) for target, run in runs.items()}
    assert summaries["jax:jit:fp32"]["target"] == "jax:jit:fp32" and summaries["jax:jit:fp32"]["last_step"] == 12
    assert summaries["jax:jit:fp32"]["final_loss"] == pytest.approx(summaries["cpu:eager:fp32"]["final_loss"],
                                                                    rel=RELATIVE)


def test_the_noise_scale_is_said_to_be_unmeasured_in_one_line_and_the_run_trains(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The default `--noise-scale on`: one line says why there is no noise scale, and the run
    trains to its end with no noise-scale readings (the toy: the cheapest step to trace)."""
    out = tmp_path / "run"
    printed = train(capsys, *WORKLOADS["toy"], *RUN, "--target", "jax:jit:fp32", "--steps", "8", "--out", str(out))
    assert printed.splitlines().count(NOT_MEASURED) == 1, printed
    assert sum("noise scale" in line for line in printed.splitlines()) == 1, printed
    assert [step for step, _ in logged_losses(out)] == [4, 8]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["last_step"] == 8 and summary["noise_scale"] is None and summary["noise_scale_readings"] is None
    assert rows(out, "noise-scale") == []


def both_targets(capsys: pytest.CaptureFixture, tmp_path: Path, *args: str) -> dict[str, Path]:
    """The same run on `cpu:eager:fp32` and `jax:jit:fp32`: each target's run folder."""
    runs = {}
    for target in ("cpu:eager:fp32", "jax:jit:fp32"):
        runs[target] = tmp_path / target.replace(":", "-")
        train(capsys, *args, "--target", target, "--out", str(runs[target]))
    return runs


def batch_norms(row: dict) -> tuple[float, float]:
    """(|G_b|^2, |G_B|^2) of a noise-scale row: the two squared norms the step measured, from the
    row's |G|^2 and tr(Sigma) (E|G_b|^2 = |G|^2 + tr(Sigma)/b)."""
    return (row["grad_sq"] + row["trace_sigma"] / row["small_batch"],
            row["grad_sq"] + row["trace_sigma"] / row["big_batch"])


@pytest.mark.slow
def test_the_noise_scale_over_micro_batches_is_the_eager_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Every step measured over 2 slices of a random partition: the slices' squared norms and
    their mean's (compared as the norms, since |G|^2 is a difference of the two), and the losses of
    the one update on the slices' mean gradient. A program that measured both norms on one slice,
    or stepped on one slice's gradient, is off by ~10% and more: the slices' norms differ from the
    mean's by tr(Sigma)/16, a sixth of them here."""
    runs = both_targets(capsys, tmp_path, *WORKLOADS["mahjong"], *RUN, "--steps", "12",
                        "--noise-scale-micro-batches", "2", "--noise-scale-every", "1")
    eager, traced = (rows(runs[target], "noise-scale") for target in ("cpu:eager:fp32", "jax:jit:fp32"))
    assert [row["step"] for row in traced] == [row["step"] for row in eager] == [4, 8, 12]
    for ours, theirs in zip(traced, eager):
        assert (ours["method"], ours["small_batch"], ours["big_batch"], ours["measured_steps"]) == \
            ("micro-batches", 8, 16, theirs["measured_steps"])
        assert batch_norms(ours) == pytest.approx(batch_norms(theirs), rel=RELATIVE), (ours, theirs)
        small_sq, big_sq = batch_norms(ours)
        assert small_sq > big_sq * 1.1, ours  # the two batches differ: slices' norms are not the mean's
    losses = {target: logged_losses(run) for target, run in runs.items()}
    assert [loss for _, loss in losses["jax:jit:fp32"]] == pytest.approx(
        [loss for _, loss in losses["cpu:eager:fp32"]], rel=RELATIVE)


@pytest.mark.slow
def test_auto_on_jax_switches_where_the_eager_run_switches(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """auto reads the noise scale the program's slices give: the same batches at the same steps
    (the toy: its noise scale outgrows each batch within a few steps; the noise scale alone
    decides, as the two targets' step times differ)."""
    runs = both_targets(capsys, tmp_path, *WORKLOADS["toy"], *UNBATCHED, "--batch-schedule", "auto",
                        "--global-batch-min", "8", "--global-batch-max", "64", "--samples", "2048",
                        "--noise-scale-micro-batches", "2", "--noise-scale-every", "1", "--auto-step-times", "off")

    def switches(run: Path) -> list[tuple[int, int, int]]:
        return [(row["step"], row["from_global_batch"], row["to_global_batch"]) for row in rows(run, "batch-switch")]

    eager, traced = (switches(runs[target]) for target in ("cpu:eager:fp32", "jax:jit:fp32"))
    assert eager, "the eager run never switched: the comparison would say nothing"
    assert traced == eager


@pytest.mark.slow
def test_a_schedule_past_the_memory_cap_steps_in_micro_batches_as_eager_does(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Batch 32 past a cap of 16 per device: two slices of 16, one update on their mean."""
    runs = both_targets(capsys, tmp_path, *WORKLOADS["mahjong"], *UNBATCHED, "--noise-scale", "off",
                        "--batch-schedule", "16@0,32@64", "--max-batch-per-device", "16", "--steps", "12")
    eager, traced = (logged_losses(runs[target]) for target in ("cpu:eager:fp32", "jax:jit:fp32"))
    assert [step for step, _ in traced] == [step for step, _ in eager] == [4, 8, 12]
    assert [loss for _, loss in traced] == pytest.approx([loss for _, loss in eager], rel=RELATIVE)
    switched = rows(runs["jax:jit:fp32"], "batch-switch")[-1]
    assert switched["micro_batches"] == 2, switched


# --- resume -----------------------------------------------------------------------------------------
RESUMED = [*WORKLOADS["mahjong"], *RUN, "--target", "jax:jit:fp32", "--noise-scale", "off", "--checkpoint-every", "4",
           "--keep-checkpoints", "0", "--lr-scaling", "none", "--lr", "3e-3", "--warmup-steps", "0",
           "--min-lr-ratio", "1"]
"""A constant learning rate (no warm-up, a cosine to 1x): a run of 4 steps then resumed to 8 has
the schedule of a run of 8 (the cosine's length is the run's steps). A large rate moves the
parameters by ~1e-2 in 4 steps, far above the tolerance."""


@pytest.mark.slow
def test_a_jax_run_resumed_at_its_checkpoint_ends_as_an_uninterrupted_run(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from trainspeed.train.checkpoint import find_checkpoint, load_checkpoint

    whole, halves = tmp_path / "whole", tmp_path / "halves"
    train(capsys, *RESUMED, "--steps", "8", "--out", str(whole))
    train(capsys, *RESUMED, "--steps", "4", "--out", str(halves))
    assert json.loads((halves / "summary.json").read_text())["last_step"] == 4
    printed = train(capsys, *RESUMED, "--steps", "8", "--out", str(halves), "--resume")
    assert f"resumed from {halves / 'checkpoints' / 'step-000000004.pt'} at step 4" in printed, printed

    summary = json.loads((halves / "summary.json").read_text())
    assert (summary["first_step"], summary["last_step"]) == (4, 8)
    reference = json.loads((whole / "summary.json").read_text())
    assert summary["final_loss"] == pytest.approx(reference["final_loss"], rel=1e-6)
    resumed_rows, reference_rows = logged_losses(halves), logged_losses(whole)
    assert [step for step, _ in resumed_rows] == [step for step, _ in reference_rows] == [4, 8]
    assert [loss for _, loss in resumed_rows] == pytest.approx([loss for _, loss in reference_rows], rel=1e-6)

    finished, uninterrupted = (find_checkpoint(run).payload for run in (halves, whole))
    assert finished["step"] == uninterrupted["step"] == 8
    ours, theirs = finished["trainable"]["networks"]["policy"], uninterrupted["trainable"]["networks"]["policy"]
    assert set(ours) == set(theirs)
    at_4 = load_checkpoint(whole / "checkpoints" / "step-000000004.pt")
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, rtol=1e-6, atol=1e-7, msg=name)
    # the parameters moved between the checkpoints: equal parameters are not untouched ones
    moved_by = max(float((theirs[name] - before).abs().max())
                   for name, before in at_4["trainable"]["networks"]["policy"].items())
    assert moved_by > 1e-3, moved_by
    # the optimizer's state travelled too: its moments are the uninterrupted run's
    for own, reference_state in zip(finished["trainable"]["optimizers"]["policy"]["state"].values(),
                                    uninterrupted["trainable"]["optimizers"]["policy"]["state"].values()):
        for key, value in reference_state.items():
            torch.testing.assert_close(own[key], value, rtol=1e-5, atol=1e-9, msg=key)
