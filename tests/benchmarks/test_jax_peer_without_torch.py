"""The JAX reference peer runs where there is no torch (a TPU host has JAX, optax and trainspeed's
torch-free modules only), and its rows there are of the same workload: the Mahjong workload's
definition hash and FLOPs per sample, as trainspeed's workload (which imports torch) gives them.
"""

import importlib.util
import json

import pytest
from child_commands import run_child
from peer_helpers import ALL_SIZES, ROOT
from without_torch import script_without_torch

from benchmarks.reference import common
from trainspeed.workloads.identity import identify
from trainspeed.workloads.mahjong.workload import MahjongWorkload



def _has_jax() -> bool:
    """Whether the JAX peer can run, without importing JAX here (see jax_peer_checks.py)."""
    return all(importlib.util.find_spec(name) is not None for name in ("jax", "optax"))


def test_the_workload_identity_hashed_from_its_files_is_identifys():
    assert common.mahjong_identity() == identify(MahjongWorkload())


@pytest.mark.parametrize("size", ALL_SIZES)
def test_the_pinned_flops_per_sample_are_the_workloads(size):
    """The FLOPs a peer's net must count where torch is missing: update `WORKLOAD_FLOPS_PER_SAMPLE`
    (and both peers' nets) when the workload's net changes."""
    assert common.WORKLOAD_FLOPS_PER_SAMPLE[size] == MahjongWorkload().flops_per_sample(size)


@pytest.mark.e2e
@pytest.mark.skipif(not _has_jax(), reason="jax is not installed: the JAX reference peer needs `pip install .[jax]`")
def test_the_jax_peer_writes_the_workloads_row_in_a_process_without_torch(tmp_path):
    out = tmp_path / "peer.jsonl"
    result = run_child([*script_without_torch(str(ROOT / "benchmarks" / "reference" / "jax_optax.py")),
                        "--size", "tiny", "--batch-sizes", "16", "--windows", "1", "--min-window-s", "0.05",
                        "--warmup-steps", "1", "--threads", "1", "--out", str(out)], timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    workload = MahjongWorkload()
    assert row["status"] == "ok" and row["samples_per_s"] > 0 and row["batch_size"] == 16
    assert row["target"] == "reference-jax:cpu:jit:fp32" and row["workload"] == workload.name
    assert {key: row[key] for key in ("workload_module", "workload_version", "workload_sha256")} == (
        identify(workload).row_fields())
    assert row["flops_per_sample"] == workload.flops_per_sample("tiny")
    assert row["achieved_tflops"] == pytest.approx(row["samples_per_s"] * row["flops_per_sample"] / 1e12)
    assert row["machine"]["torch_version"] is None and row["machine"]["torch_threads"] is None
