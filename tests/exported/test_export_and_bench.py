"""`trainspeed export` writes a workload's step as jax.export artifacts with its state, batch and a
manifest; `trainspeed bench --exported DIR` runs them where only JAX and numpy are (a TPU host),
and writes the bench's own rows. A folder that does not fit this machine, or whose files changed,
is refused in one line before anything runs.

The folder is exported once for the module (Mahjong tiny, for the CPU, so the artifacts run here);
tests that change it change a copy.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from child_commands import run_child
from without_torch import trainspeed_without_torch

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.train.lr_rule import lr_multiplier

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    # JAX without x64 holds Mahjong's int64 index tensors as int32 (their values fit), and says so.
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

SIZES = (8, 16)
MICRO_BATCH = 8
"""Batch 16's step accumulates its gradient over two micro-batches of 8 (`export --micro-batch-size`)."""
EXPORT = ["export", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32", "--platform", "cpu",
          "--batch-sizes", ",".join(map(str, SIZES)), "--micro-batch-size", str(MICRO_BATCH)]
QUICK = ["--windows", "1", "--min-window-s", "0.05", "--warmup-steps", "1", "--no-plot", "--no-progress"]



@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exported") / "mahjong-tiny"
    assert main([*EXPORT, "--out", str(folder)]) == 0
    return folder


def copy_of(exported: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "copy"
    shutil.copytree(exported, folder)
    return folder


def edit_manifest(folder: Path, **fields) -> Path:
    manifest = folder / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), **fields}))
    return folder


def change_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_export_writes_artifacts_state_batch_and_a_manifest_naming_each_with_its_sha256(exported: Path) -> None:
    import jax

    files = {path.name for path in exported.iterdir()}
    per_size = {f"{kind}_b{size}.jaxexport" for kind in ("train", "eval") for size in SIZES}
    assert files == {"manifest.json", "state.npz", "batch.npz", *per_size}

    manifest = json.loads((exported / "manifest.json").read_text())
    assert (manifest["workload"], manifest["size"], manifest["target"]) == ("mahjong", "tiny", "jax:jit:fp32")
    assert manifest["platforms"] == ["cpu"] and manifest["jax_version"] == jax.__version__
    assert [program["batch_size"] for program in manifest["programs"]] == list(SIZES)

    def sha256(name: str) -> str:
        return hashlib.sha256((exported / name).read_bytes()).hexdigest()

    for program in manifest["programs"]:
        assert program["train_sha256"] == sha256(program["train_file"])
        assert program["eval_sha256"] == sha256(program["eval_file"])
    assert (manifest["state_sha256"], manifest["batch_sha256"]) == (sha256("state.npz"), sha256("batch.npz"))


SCHEDULE = tuple(lr_multiplier(step, 4, 2, 0.05) for step in range(4))
"""Each step's learning rate over the exported one: a warm-up of 2 steps, then the cosine down to
0.05 (0.5, 1, 1, 0.05), as `train --exported` hands its steps their rates."""


@pytest.mark.parametrize("batch", SIZES, ids=["whole", "in-micro-batches"])
def test_the_exported_step_trains_as_eager_pytorch_on_the_exported_batch(exported: Path, batch: int) -> None:
    """The artifact is the workload's own step: from the exported state, on the exported batch's
    first samples, each step at a schedule's rate (an input of the program), its losses are
    cpu:eager:fp32's whole steps at the same rates on the same samples (relative 1e-5; the losses
    fall by ~5% a step), batch 16's too, whose program runs it in two micro-batches."""
    from trainspeed.exported.load import ExportedSteps
    from trainspeed.targets import get_target
    from trainspeed.workloads import get_workload

    steps = ExportedSteps.open(exported, "mahjong")
    assert steps.manifest.program(batch).micro_batches == max(1, batch // MICRO_BATCH)
    program, state = steps.train_program(batch), steps.initial_state()
    host_batch, rates = steps.host_batch(batch), steps.learning_rates()
    exported_losses = []
    for factor in SCHEDULE:
        state, loss = program(state, host_batch, rates * factor)
        exported_losses.append(float(loss))

    workload, target = get_workload("mahjong"), get_target("cpu:eager:fp32")
    trainable = target.build(workload, "tiny", 0)
    groups = [group for optimizer in trainable.optimizers.values() for group in optimizer.param_groups]
    peaks = [group["lr"] for group in groups]
    eager_batch = {key: value[:batch] for key, value in
                   workload.synthetic_batch("tiny", max(SIZES), torch.Generator().manual_seed(0)).items()}
    eager_losses = []
    for factor in SCHEDULE:
        for group, peak in zip(groups, peaks):
            group["lr"] = peak * factor
        eager_losses.append(float(target.run_step(trainable, eager_batch)))
    assert eager_losses[-1] < eager_losses[0]
    assert exported_losses == pytest.approx(eager_losses, rel=1e-5)


@pytest.mark.e2e
def test_bench_exported_runs_in_a_process_that_cannot_import_torch(exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    result = run_child([*trainspeed_without_torch("bench"), "--exported", str(exported), "--out", str(out),
                        *QUICK], timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["batch_size"] for row in rows] == list(SIZES)
    for row in rows:
        assert row["kind"] == "bench" and row["status"] == "ok" and row["target"] == "jax:jit:fp32", row
        assert (row["workload"], row["size"]) == ("mahjong", "tiny")
        assert row["samples_per_s"] > 0 and row["compile_s"] > 0, row
        assert row["jax_versions"].startswith("jax ") and row["device_name"].startswith("JAX CPU"), row
        assert row["exported"].startswith(str(exported)) and "manifest sha256" in row["exported"], row
        assert row["peak_tflops"] > 0 and row["peak_tflops_source"] == "measured", row  # JAX's probe, not torch's
        # JAX's CPU has no nominal peak: MFU is the measured one's, and the measured column says so too.
        assert row["measured_peak_tflops"] == row["peak_tflops"] and row["mfu_of_measured_peak"] == row["mfu"], row
        assert row["nominal_peak_chip"] is None, row
        assert row["program_argument_bytes"] > 0 and row["program_output_bytes"] > 0, row  # XLA's memory analysis


def _bench(folder: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["bench", "--exported", str(folder), "--out", str(tmp_path / "rows.jsonl"), *QUICK, *extra]


def test_bench_exported_on_a_chip_with_a_nominal_peak_divides_by_it_unless_a_peak_is_given(
        exported, tmp_path, monkeypatch) -> None:
    """In this process, with JAX's CPU named as a TPU v5e: the fp32 step's MFU is against the chip's
    nominal peak (the bf16 figure, which a TPU's fp32 matmuls run at), the measured chain beside it;
    --peak-tflops overrides both and measures no chain."""
    from trainspeed import jaxrt

    monkeypatch.setattr(jaxrt, "device_name", lambda: "TPU v5 lite")
    assert main(_bench(exported, tmp_path, "--batch-sizes", "8")) == 0
    assert main(_bench(exported, tmp_path, "--batch-sizes", "8", "--peak-tflops", "500")) == 0
    nominal, given = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert (nominal["peak_tflops"], nominal["peak_tflops_source"], nominal["nominal_peak_chip"]) == (
        197.0, "nominal", "TPU v5e fp32")
    assert "https://cloud.google.com/tpu/docs/v5e" in nominal["nominal_peak_source"]
    assert "bf16 figure" in nominal["nominal_peak_source"]
    assert nominal["mfu"] == pytest.approx(nominal["achieved_tflops"] / 197.0)
    assert nominal["measured_peak_tflops"] > 0
    assert nominal["mfu_of_measured_peak"] == pytest.approx(nominal["achieved_tflops"] / nominal["measured_peak_tflops"])
    assert (given["peak_tflops"], given["peak_tflops_source"], given["nominal_peak_chip"]) == (500.0, "given", None)
    assert given["measured_peak_tflops"] is None and given["mfu_of_measured_peak"] is None


@pytest.mark.parametrize("fields, extra, says", [
    ({"jax_version": "0.4.1"}, (), "exported with jax 0.4.1"),
    ({"platforms": ["tpu"]}, (), "exported for tpu, and this machine's JAX runs on cpu"),
    ({}, ("--workload", "char"), "holds the steps of workload 'mahjong', not 'char'"),
    ({}, ("--targets", "cpu:eager:fp32"), "--targets does not apply"),
], ids=["another-jax", "for-a-tpu", "another-workload", "targets-given"])
def test_a_folder_that_does_not_fit_this_machine_or_command_is_refused_in_one_line(
        exported, tmp_path, cli_error, fields, extra, says) -> None:
    folder = edit_manifest(copy_of(exported, tmp_path), **fields)
    assert says in cli_error(*_bench(folder, tmp_path, *extra))
    assert not (tmp_path / "rows.jsonl").exists()


def test_a_changed_artifact_is_refused_by_its_sha256(exported, tmp_path, capsys) -> None:
    folder = copy_of(exported, tmp_path)
    change_a_byte(folder / "train_b8.jaxexport")
    assert main(_bench(folder, tmp_path)) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("trainspeed: error: ") and "train_b8.jaxexport: its sha256 is not the manifest's" in last


def test_a_changed_artifact_is_refused_before_anything_is_measured(exported, tmp_path, cli_error) -> None:
    folder = copy_of(exported, tmp_path)
    change_a_byte(folder / "train_b16.jaxexport")
    assert "train_b16.jaxexport: its sha256" in cli_error(*_bench(folder, tmp_path))
    assert not (tmp_path / "rows.jsonl").exists()


def test_export_never_writes_over_a_folder(exported, cli_error) -> None:
    before = (exported / "manifest.json").read_bytes()
    assert "exists; give a new folder" in cli_error(*EXPORT, "--out", str(exported))
    assert (exported / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("flags, says", [
    (("--target", "cpu:eager:fp32"), "--target cpu:eager:fp32: export traces the step through the jax family"),
    (("--platform", "bogus"), "--platform bogus: choose one of tpu, cpu, cuda, rocm"),
], ids=["not-a-jax-target", "unknown-platform"])
def test_export_refuses_what_it_cannot_export(tmp_path, cli_error, flags, says) -> None:
    out = tmp_path / "new"
    assert says in cli_error(*EXPORT, *flags, "--out", str(out))
    assert not out.exists()


def test_a_folder_with_fewer_batch_rows_benches_larger_sizes_on_its_rows_repeated(tmp_path) -> None:
    """`export --batch-rows 3` carries 3 samples (a folder of 224 px images would otherwise carry
    every sample of its largest size); the bench of batch 16 steps on them repeated in order."""
    from trainspeed.exported.load import ExportedSteps

    folder = tmp_path / "few-rows"
    assert main([*EXPORT, "--batch-rows", "3", "--out", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["batch_rows"] == 3
    steps = ExportedSteps.open(folder)
    columns, stored = steps.host_batch(16), steps.host_batch(3)
    for column, rows in zip(columns, stored):
        assert len(column) == 16 and (column[3:6] == rows).all() and (column[15] == rows[0]).all()
    assert main(_bench(folder, tmp_path, "--batch-sizes", "16")) == 0
    (row,) = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert row["status"] == "ok" and row["batch_size"] == 16
