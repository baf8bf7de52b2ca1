"""A step in micro-batches (`export --micro-batch-size`) accumulates its gradient over equal slices
of the batch, one slice after another in the program, and makes one update: where the loss is a
mean over samples and nothing couples the samples, that is the whole batch's update, for a step of
one backward() and for every phase of a phased step. A slice's forward sees the buffers the slice
before it left, and the EMA after the phases sees the whole batch.

Tolerance: absolute 1e-6 on parameters of order 0.1-1 after two steps. The slices' gradient mean
and the whole batch's differ only in float32 summation order; a step that dropped a slice, or
summed instead of averaging, moves the parameters by 1e-3 or more. The networks the checks read
step with SGD, whose update scales with the gradient (Adam's would hide a wrong scale).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from toy_workload import ToyWorkload
from torch import nn
from torch.nn import functional

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.targets.jaxjit.functional import FunctionalStep, host_batch_arrays
from trainspeed.workloads.base import Batch
from trainspeed.workloads.phases import PhasedTrainable, StepPhase

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))

BATCH, TOLERANCE = 16, 1e-6


class TwoPhases(PhasedTrainable):
    """A GAN's shape in miniature: phase "A" trains `a` on its own loss, phase "B" trains `b` on
    `a`'s output as the phase after A's update sees it; `b` counts the samples it saw in a buffer;
    an EMA of `a` follows."""

    def __init__(self) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            a, b = nn.Linear(6, 4), nn.Linear(4, 3)
        b.register_buffer("samples_seen", torch.zeros(()))
        a_ema = nn.Linear(6, 4).requires_grad_(False)
        super().__init__({"a": a, "b": b, "a_ema": a_ema})

    def trained_network_names(self) -> list[str]:
        return ["a", "b"]

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"a": torch.optim.SGD(self.networks["a"].parameters(), lr=0.1),
                           "b": torch.optim.Adam(self.networks["b"].parameters(), lr=0.01)}

    def phases(self, step: int) -> tuple[StepPhase, ...]:
        return (StepPhase("A", "a"), StepPhase("B", "b"))

    def phase_loss(self, phase: StepPhase, batch: Batch) -> torch.Tensor:
        hidden = self.networks["a"](batch["x"])
        if phase.name == "A":
            return functional.mse_loss(hidden, batch["x"][:, :4])
        self.networks["b"].samples_seen.add_(batch["x"].shape[0])
        return functional.cross_entropy(self.networks["b"](hidden.detach()), batch["y"])

    def after_updates(self, batch: Batch) -> None:
        with torch.no_grad():
            weight = batch["x"].shape[0] / (batch["x"].shape[0] + 16.0)
            for ema, now in zip(self.networks["a_ema"].parameters(), self.networks["a"].parameters()):
                ema.lerp_(now, weight)


def phased_batch() -> dict[str, np.ndarray]:
    generator = torch.Generator().manual_seed(1)
    return host_batch_arrays({"x": torch.randn(BATCH, 6, generator=generator),
                              "y": torch.randint(0, 3, (BATCH,), generator=generator)})


def two_steps(functional_step: FunctionalStep, step, batch: dict[str, np.ndarray], micro_batches: int) -> dict:
    import jax

    state, lrs = functional_step.initial_state(), jax.numpy.asarray(functional_step.learning_rates())
    run = jax.jit(lambda state, batch, lrs: step(state, batch, lrs, micro_batches=micro_batches))
    with jax.default_matmul_precision("float32"):
        for _ in range(2):
            state, loss = run(state, batch, lrs)
    return {name: np.asarray(value) for name, value in state.items()} | {"loss": np.asarray(loss)}


def assert_same_parameters(sliced: dict, whole: dict) -> None:
    parameters = [name for name in whole if name.startswith("param/")]
    assert parameters
    for name in parameters:
        np.testing.assert_allclose(sliced[name], whole[name], rtol=0, atol=TOLERANCE, err_msg=name)


def test_a_step_in_micro_batches_makes_the_whole_batchs_update() -> None:
    workload = ToyWorkload()
    batch = host_batch_arrays(workload.synthetic_batch("tiny", BATCH, torch.Generator().manual_seed(0)))
    functional_step = FunctionalStep(workload.build("tiny", 0), "fp32", 0)
    whole = two_steps(functional_step, functional_step.train, batch, 1)
    for micro_batches in (2, 4):
        sliced = two_steps(functional_step, functional_step.train, batch, micro_batches)
        assert_same_parameters(sliced, whole)
        assert abs(float(sliced["loss"]) - float(whole["loss"])) < 1e-5
    first = two_steps(functional_step, functional_step.train, {k: v[: BATCH // 2] for k, v in batch.items()}, 1)
    assert max(np.abs(first[name] - whole[name]).max() for name in whole if name.startswith("param/")) > 100 * TOLERANCE


def test_each_phase_in_micro_batches_makes_the_whole_batchs_update() -> None:
    functional_step = FunctionalStep(TwoPhases(), "fp32", 0)

    def step(state, batch, lrs, *, micro_batches):
        return functional_step.train_phases(state, batch, lrs, phases=TwoPhases().phases(0), micro_batches=micro_batches)

    whole = two_steps(functional_step, step, phased_batch(), 1)
    sliced = two_steps(functional_step, step, phased_batch(), 4)
    assert_same_parameters(sliced, whole)
    # each slice's forward counted its samples after the slice before: 2 steps x 16, as whole
    assert float(sliced["buffer/b/samples_seen"]) == float(whole["buffer/b/samples_seen"]) == 2 * BATCH
    np.testing.assert_allclose(sliced["param/a_ema/weight"], whole["param/a_ema/weight"], rtol=0, atol=TOLERANCE)


def test_export_names_the_micro_batches_and_the_bench_rows_carry_them(tmp_path: Path) -> None:
    folder, rows = tmp_path / "exported", tmp_path / "rows.jsonl"
    assert main(["export", "--workload", "toy_workload:with_adamw", "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", "4,16", "--micro-batch-size", "4", "--out", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [(program["batch_size"], program["micro_batches"]) for program in manifest["programs"]] == [(4, 1), (16, 4)]
    assert main(["bench", "--exported", str(folder), "--batch-sizes", "4,16", "--windows", "1", "--min-window-s", "0.01",
                 "--out", str(rows), "--no-plot"]) == 0
    written = [json.loads(line) for line in rows.read_text().splitlines()]
    assert [(row["batch_size"], row["micro_batches"], row["status"]) for row in written] == [(4, None, "ok"), (16, 4, "ok")]


@pytest.mark.parametrize(("flags", "said"), [
    (["--batch-sizes", "4,10", "--micro-batch-size", "4"], "--micro-batch-size 4 must divide every larger batch size; 10 do not"),
    (["--batch-sizes", "8", "--micro-batch-size", "4", "--noise-scale-micro-batches", "2"],
     "--micro-batch-size and --noise-scale-micro-batches both cut the step into slices; give one of them"),
    (["--batch-sizes", "8", "--micro-batch-size", "0"], "--micro-batch-size"),
])
def test_micro_batches_that_cannot_cut_the_batch_are_refused_in_one_line(tmp_path, capsys, flags, said) -> None:
    out = tmp_path / "out"
    assert main(["export", "--workload", "toy_workload:with_adamw", "--target", "jax:jit:fp32", "--platform", "cpu",
                 *flags, "--out", str(out)]) != 0
    error = capsys.readouterr().err.strip()
    assert said in error and len(error.splitlines()) == 1, error
    assert not out.exists()


def test_a_manifest_whose_micro_batches_do_not_cut_its_batch_is_refused(tmp_path, capsys) -> None:
    folder = tmp_path / "exported"
    assert main(["export", "--workload", "toy_workload:with_adamw", "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", "8", "--micro-batch-size", "4", "--out", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["programs"][0]["micro_batches"] = 3
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert main(["bench", "--exported", str(folder), "--out", str(tmp_path / "rows.jsonl"), "--no-plot"]) != 0
    assert "batch size 8 is not cut into 3 equal micro-batches; export the step again" in capsys.readouterr().err
