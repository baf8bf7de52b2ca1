"""The worked example of docs/workloads.md end to end, as a user runs it: standard-library text as
arrays, `data from-arrays`, `data verify`, `train`, and bits per character in the run's metrics."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import EXAMPLES, run_child

from trainspeed.cli import main

pytestmark = pytest.mark.e2e

STEPS, EVAL_EVERY = 80, 40


def _run(*args: str) -> subprocess.CompletedProcess:
    result = run_child([sys.executable, *args], path=(EXAMPLES,), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _unigram_bits(folder: Path) -> float:
    """Bits per character of the validation text under the training text's byte frequencies: what
    a model that ignores context achieves."""
    sys.path.insert(0, str(EXAMPLES))
    from trainspeed.data import open_dataset
    from trainspeed.data.base import LoaderConfig

    def targets(split: str) -> np.ndarray:
        config = LoaderConfig(batch_size=256, split=split, num_workers=0, drop_last=False, shuffle=False)
        return np.concatenate([batch["tokens"][:, 1:].numpy().ravel() for batch in open_dataset(folder, config, outputs=("tokens",))])

    counts = np.bincount(targets("train"), minlength=256) + 1.0
    return float(-np.log2(counts / counts.sum())[targets("val")].mean())


@pytest.mark.slow
def test_the_text_model_trains_on_standard_library_sources_and_reports_bits_per_character(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    arrays, data, run = tmp_path / "text.npz", tmp_path / "text", tmp_path / "run"
    # The script and the data commands run in this process (their imports are warm; their own
    # processes are not what is tested); the training is a child, as a user starts it.
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / "char_lm_workload.py"), str(arrays), "--files", "150",
                                      "--file-bytes", "4096"])
    runpy.run_path(str(EXAMPLES / "char_lm_workload.py"), run_name="__main__")
    assert main(["data", "from-arrays", str(arrays), "--out", str(data), "--split-by", "document",
                 "--val-fraction", "0.1"]) == 0
    capsys.readouterr()
    assert main(["data", "verify", str(data)]) == 0
    assert "OK" in capsys.readouterr().out
    trained = _run("-m", "trainspeed", "train", "--workload", "char_lm_workload:CharLMWorkload", "--size", "tiny",
                   "--data", str(data), "--batch-size-per-device", "32", "--steps", str(STEPS), "--eval-every",
                   str(EVAL_EVERY), "--threads", "1", "--no-progress", "--out", str(run))
    assert "bits_per_char" in trained.stdout

    validation = json.loads((run / "summary.json").read_text())["validation"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    val_rows = [row for row in rows if row["kind"] == "val"]
    assert [row["step"] for row in val_rows] == [EVAL_EVERY, STEPS]
    assert val_rows[-1]["bits_per_char"] == validation["bits_per_char"]
    # below what byte frequencies alone give: the model uses its context (uniform bytes would be 8)
    assert validation["bits_per_char"] < _unigram_bits(data) - 0.2
