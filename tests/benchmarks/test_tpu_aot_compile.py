"""benchmarks/tpu_aot_compile.py: an exported folder's programs compiled without running them, and
what XLA says each needs. The chip's compiler (libtpu) is not on this machine, so the compile is
checked on this CPU's device, where the same artifact exported for the CPU compiles; a bad folder
or batch is one line either way."""

from __future__ import annotations

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
    manifest = read_manifest(exported)
    ((name, sha256),) = manifest.program(8).train_files()
    artifact = read_checked(exported, name, sha256, manifest.file_bytes[name])
    row = compile_program(name, artifact, jax.devices("cpu")[0])
    assert row["program"] == "train_b8.jaxexport"
    assert row["compile_s"] >= 0 and row["argument_gb"] > 0 and row["tflops"] > 0
    page = markdown([{**row, "size": "tiny", "batch": 8, "precision": "fp32", "topology": "v5e:1x1",
                      "host_cpus": 2, "load_1m": 0.5, "command": "python benchmarks/tpu_aot_compile.py X --batch 8"}])
    assert "| train_b8.jaxexport |" in page and "`python benchmarks/tpu_aot_compile.py X --batch 8`" in page


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
