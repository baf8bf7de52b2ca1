"""benchmarks/tpu_aot_compile.py: an exported folder's programs compiled without running them, and
what XLA says each needs. The chip's compiler (libtpu) is not on this machine, so the compile is
checked on this CPU's device, where the same artifact exported for the CPU compiles; a bad folder
or batch is one line either way."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import pytest

from benchmarks.tpu_aot_compile import compile_program, main, markdown
from trainspeed.cli import main as trainspeed_main
from trainspeed.exported.folder import read_checked, read_manifest


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aot") / "mahjong_tiny"
    assert trainspeed_main(["export", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32",
                            "--platform", "cpu", "--batch-sizes", "8", "--out", str(folder)]) == 0
    return folder


def test_a_program_compiles_and_reports_its_seconds_temporaries_arguments_and_flops(exported: Path) -> None:
    """The sizes against what the program is known to take: its arguments are its inputs' bytes
    (the state and the batch, from the artifact's own shapes), its FLOPs about the workload's count
    for the batch (its own, counted on the torch model: XLA's count is within a factor of it),
    and the page's GB and TFLOPs those counts in its units, in their columns."""
    manifest = read_manifest(exported)
    ((name, sha256),) = manifest.program(8).train_files()
    artifact = read_checked(exported, name, sha256, manifest.file_bytes[name])
    row = compile_program(name, artifact, jax.devices("cpu")[0])
    inputs = jax.export.deserialize(bytearray(artifact)).in_avals
    assert row["program"] == "train_b8.jaxexport" and row["compile_s"] >= 0
    assert row["argument_bytes"] == sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in inputs)
    assert row["temp_bytes"] > 0  # activations and gradients: a training step holds some
    assert 0.5 < row["flops"] / (manifest.flops_per_sample * 8) < 2
    assert (row["temp_gb"], row["argument_gb"], row["tflops"]) == (
        round(row["temp_bytes"] / 1e9, 3), round(row["argument_bytes"] / 1e9, 3), round(row["flops"] / 1e12, 4))
    page = markdown([{**row, "size": "tiny", "batch": 8, "precision": "fp32", "topology": "v5e:1x1",
                      "host_cpus": 2, "load_1m": 0.5, "command": "python benchmarks/tpu_aot_compile.py X --batch 8"}])
    assert (f"| train_b8.jaxexport | {row['compile_s']} | {row['temp_gb']} | {row['argument_gb']} | {row['tflops']} |"
            in page.splitlines())
    assert "`python benchmarks/tpu_aot_compile.py X --batch 8`" in page


@pytest.mark.parametrize(("folder", "batch", "says"), [
    pytest.param(None, 80, "batch size 80 was not exported; this folder has 8", id="a-batch-not-exported"),
    pytest.param("missing", 8, "not a folder", id="a-missing-folder"),
])
def test_a_bad_folder_or_batch_is_one_line_and_exit_2(exported: Path, tmp_path: Path, folder: str | None, batch: int,
                                                      says: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = exported if folder is None else tmp_path / folder
    assert main([str(path), "--batch", str(batch)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("tpu_aot_compile: error: ") and says in error
