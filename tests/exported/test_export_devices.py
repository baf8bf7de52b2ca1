"""`export --devices N`: every program traced for a mesh of N devices (the batch split over them,
the state copied to each), and `train --exported` / `bench --exported` running it over N devices
of the host, where only JAX is (here N = 2 of JAX's CPU host devices, in processes of their own,
since a process's JAX fixes its device count when it starts).

Proof of sameness: the run over 2 devices at 8 samples each ends within 1e-4 (as one vector, in
the distance the run moved the parameters) of the session's one-device export trained at batch 16
on the same data: the same program partitioned, whose gradient all-reduce sums in another order
(observed: 5e-6 absolute over 12 steps).
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_child, run_ok
from exported_runs import EXPORT, copy_of, edit_manifest, rows
from without_torch import trainspeed_without_torch

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

GLOBAL_BATCH, STEPS, TOLERANCE = 16, 12, 1e-4


def run_args(exported: Path, data: Path, out: Path, per_device: int) -> list[str]:
    return ["train", "--exported", str(exported), "--data", str(data), "--batch-size-per-device", str(per_device),
            "--steps", str(STEPS), "--checkpoint-every", str(STEPS), "--eval-every", str(STEPS), "--eval-batches", "2",
            "--log-every", "6", "--no-progress", "--out", str(out)]


def last_state(run: Path) -> dict[str, np.ndarray]:
    (last,) = sorted(glob.glob(str(run / "checkpoints" / "step-*.npz")))[-1:]
    with np.load(last) as arrays:
        return {name: arrays[name].astype(np.float64) for name in arrays.files if arrays[name].dtype.kind == "f"}


def distance(one: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> float:
    return float(np.sqrt(sum(((one[name] - other[name]) ** 2).sum() for name in one)))


def test_a_step_exported_for_two_devices_trains_as_the_one_device_step_and_benches_per_device(
        small_export: Path, selfplay_data: Path, tmp_path: Path) -> None:
    meshed = tmp_path / "export-x2"
    run_ok(*EXPORT, "--devices", "2", "--out", str(meshed), timeout=300)
    manifest = json.loads((meshed / "manifest.json").read_text())
    assert manifest["devices"] == 2

    on_two = tmp_path / "run-x2"
    trained = run_child(trainspeed_without_torch(*run_args(meshed, selfplay_data, on_two, GLOBAL_BATCH // 2)))
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    assert "x 2, batch 16" in trained.stdout
    summary = json.loads((on_two / "summary.json").read_text())
    assert (summary["world_size"], summary["batch_size_per_device"], summary["global_batch"]) == (2, 8, 16)

    on_one = tmp_path / "run-x1"
    assert main(run_args(small_export, selfplay_data, on_one, GLOBAL_BATCH)) == 0
    with np.load(small_export / "state.npz") as stored:  # the parameters as exported (optimizer states start at 0)
        start = {name: stored[name].astype(np.float64) for name in stored.files if stored[name].dtype.kind == "f"}
    ended = last_state(on_one)
    moved = distance({name: ended[name] for name in start}, start)
    assert distance(last_state(on_two), ended) <= TOLERANCE * moved
    (validated_on_two,), (validated_on_one,) = rows(on_two, "val"), rows(on_one, "val")
    assert validated_on_two["loss"] == pytest.approx(validated_on_one["loss"], rel=1e-4)

    bench_rows = tmp_path / "bench.jsonl"
    benched = run_child(trainspeed_without_torch("bench", "--exported", str(meshed), "--batch-sizes", "16",
                                                 "--windows", "2", "--min-window-s", "0.05", "--no-plot",
                                                 "--no-progress", "--out", str(bench_rows)))
    assert benched.returncode == 0, benched.stderr[-2000:]
    (row,) = map(json.loads, bench_rows.read_text().splitlines())
    assert row["devices"] == 2 and row["status"] == "ok"
    assert row["achieved_tflops"] == pytest.approx(row["samples_per_s"] * row["flops_per_sample"] / 1e12 / 2)


def test_devices_that_do_not_divide_a_batch_size_are_refused_before_anything_is_traced(
        tmp_path: Path, cli_error) -> None:
    error = cli_error(*EXPORT, "--devices", "3", "--out", str(tmp_path / "export"))
    assert "--devices 3 must divide every batch size (each device takes an equal slice); 8,16 do not" in error
    assert not (tmp_path / "export").exists()


def test_a_folder_for_more_devices_than_the_host_has_is_refused_in_one_line(
        small_export: Path, selfplay_data: Path, tmp_path: Path, cli_error) -> None:
    import jax

    found = len(jax.devices())  # this process's JAX has started: its devices are fixed
    folder = edit_manifest(copy_of(small_export, tmp_path / "export"), lambda manifest: manifest.update(devices=8))
    out = tmp_path / "run"
    error = cli_error("train", "--exported", str(folder), "--data", str(selfplay_data), "--batch-size-per-device", "1",
                      "--steps", "2", "--no-progress", "--out", str(out))
    assert f"its programs run over 8 devices (export --devices 8), and JAX sees {found} here" in error
    assert not out.exists()


@pytest.mark.parametrize("devices, says", [(0, "devices 0 is not one of 1..65536"),
                                           (3, "devices 3 does not divide every batch size (8,16)")])
def test_a_manifest_whose_devices_cannot_be_is_refused_in_one_line(
        small_export: Path, tmp_path: Path, cli_error, devices: int, says: str) -> None:
    folder = edit_manifest(copy_of(small_export, tmp_path / "export"), lambda manifest: manifest.update(devices=devices))
    assert says in cli_error("bench", "--exported", str(folder), "--no-plot", "--no-progress",
                             "--out", str(tmp_path / "rows.jsonl"))
