"""A step of several updates (StyleGAN3's G, D and R1 every 16th step) exports as one program per
list of phases, and the manifest names which list each step of the cycle runs: a machine with JAX
only runs step 0 with R1 and the next fifteen without, as the workload's own step does, to eager
PyTorch's losses. (That the exported path imports no torch is proven on Mahjong's folder,
tests/exported/test_export_and_bench.py.)

The folder is StyleGAN3 with latents made from the batch's shape (`fixed_latents_gan`, as
tests/targets/jaxjit/test_phased_steps.py trains it): drawn latents differ between torch's
generator and JAX's key by design.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from child_commands import TESTS, run_child, trainspeed_env
from without_torch import script_without_torch

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))

SIZE, BATCH = "tiny-t+fir-matmul", 4
WORKLOAD = "fixed_latents_gan:FixedLatentsGAN"
STEPS, RELATIVE = 3, 5e-4
"""Step 0 runs R1, 1 and 2 do not; the tolerance is test_phased_steps.py's (StyleGAN3's Adam has
beta1 = 0: a gradient within rounding of zero may step the other way). A step without R1 is off by
9.6e-3 at step 2, 19 tolerances."""
OPTIMIZED_XLA = "--xla_backend_optimization_level=1"
"""The exported steps run in a process whose XLA optimizes its code, as test_phased_steps.py's
jax run: the session's -O0 code runs each of these steps in about 9 CPU-s against 1 to 2."""

RUN_STEPS = """
import json, sys
from pathlib import Path
import jax
from trainspeed.exported.load import ExportedSteps

folder, batch_size, steps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
exported = ExportedSteps.open(folder)
state, rates = exported.initial_state(), exported.learning_rates()
batch = jax.device_put(exported.host_batch(batch_size))
losses = []
for step in range(steps):
    state, loss = exported.train_program(batch_size, step)(state, batch, rates)
    losses.append(float(loss))
print(json.dumps(losses))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exported") / "stylegan3"
    assert main(["export", "--workload", WORKLOAD, "--size", SIZE, "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", str(BATCH), "--out", str(folder)]) == 0
    return folder


def test_the_manifest_names_the_phases_of_each_step_and_a_program_for_each(exported: Path) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["step_phases"] == ["G+D+R1"] + ["G+D"] * 15
    (program,) = manifest["programs"]
    assert {entry["phases"] for entry in program["phase_programs"]} == {"G+D+R1", "G+D"}
    assert program["train_file"] == "train_b4_G+D.jaxexport"  # the one most steps run
    for entry in program["phase_programs"]:
        assert (exported / entry["train_file"]).stat().st_size > 0


def test_each_step_loads_the_program_of_its_phases(exported: Path) -> None:
    """Step 0 runs G+D+R1 and the fifteen after it G+D, then again; steps of one list share one
    program. (Running them compiles both: the TPU rows of docs/results/tpu_stylegan3_t256.jsonl
    came from this path; here the CPU would spend most of a minute compiling.)"""
    from trainspeed.exported.load import ExportedSteps

    steps = ExportedSteps.open(exported, "fixed-latents-gan")
    steps.verify([BATCH])
    assert [steps.manifest.phases_of_step(step) for step in (0, 1, 15, 16, 17)] == \
        ["G+D+R1", "G+D", "G+D", "G+D+R1", "G+D"]
    assert steps.train_program(BATCH, 0) is not steps.train_program(BATCH, 1)
    assert steps.train_program(BATCH, 1) is steps.train_program(BATCH, 2)
    assert steps.train_program(BATCH, 16) is steps.train_program(BATCH, 0)
    assert len(steps.train_programs(BATCH)) == 2


@pytest.mark.e2e
def test_the_exported_steps_train_as_eager_pytorch_with_r1_at_step_0(exported: Path, tmp_path: Path) -> None:
    """Each step runs the program of its phases, from the exported state on the exported batch:
    the losses are cpu:eager:fp32's steps on the same batch (a program without R1 would be off at
    step 2)."""
    from fixed_latents_gan import FixedLatentsGAN

    from trainspeed.targets import get_target

    script = tmp_path / "run_steps.py"
    script.write_text(RUN_STEPS)
    flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), OPTIMIZED_XLA]))
    result = run_child(script_without_torch(str(script), str(exported), str(BATCH), str(STEPS)),
                       env=trainspeed_env(TESTS, XLA_FLAGS=flags), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    exported_losses = json.loads(result.stdout.splitlines()[-1])

    workload, target = FixedLatentsGAN(), get_target("cpu:eager:fp32")
    trainable = target.build(workload, SIZE, 0)
    batch = workload.synthetic_batch(SIZE, BATCH, torch.Generator().manual_seed(0))
    eager_losses = [float(target.run_step(trainable, batch)) for _ in range(STEPS)]
    assert exported_losses == pytest.approx(eager_losses, rel=RELATIVE), (exported_losses, eager_losses)


def test_a_manifest_whose_steps_name_a_program_it_lacks_is_refused_in_one_line(exported, tmp_path, capsys) -> None:
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(exported, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["step_phases"][3] = "G+D+EMA"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    code = main(["bench", "--exported", str(folder), "--out", str(tmp_path / "rows.jsonl"), "--no-plot"])
    assert code != 0
    assert "has no program for some of the step phases ['G+D+EMA']; export the step again" in capsys.readouterr().err


def test_a_phased_step_in_slices_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The noise-scale meter's step in slices is one update; a step of several phases is exported whole."""
    assert main(["export", "--workload", "stylegan3", "--size", SIZE, "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", str(BATCH), "--noise-scale-micro-batches", "2", "--out", str(tmp_path / "out")]) != 0
    error = capsys.readouterr().err
    assert "a step of several updates (its phases) is exported whole" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
