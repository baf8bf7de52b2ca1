"""The worked example of docs/workloads.md end to end, as a user runs it: standard-library text as
arrays, `data from-arrays`, `data verify`, `train`, and bits per character in the run's metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from child_commands import EXAMPLES, run_child

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
def test_the_text_model_trains_on_standard_library_sources_and_reports_bits_per_character(tmp_path: Path) -> None:
    arrays, data, run = tmp_path / "text.npz", tmp_path / "text", tmp_path / "run"
    _run(str(EXAMPLES / "char_lm_workload.py"), str(arrays), "--files", "150", "--file-bytes", "4096")
    _run("-m", "trainspeed", "data", "from-arrays", str(arrays), "--out", str(data), "--split-by", "document",
         "--val-fraction", "0.1")
    assert "OK" in _run("-m", "trainspeed", "data", "verify", str(data)).stdout
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
