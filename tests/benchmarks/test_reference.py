"""The reference peers train the same network as trainspeed and write rows trainspeed can read.

Same network is shown by parameter shapes and counts, by FLOPs per sample, and by copying
trainspeed's weights into each peer and getting the same logits, loss and gradients.
"""

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from child_commands import run_child, start_child
from peer_helpers import (
    ALL_SIZES,
    ROOT,
    batch,
    plain_torch_name,
    sorted_shapes,
    trainspeed_policy,
)

from benchmarks.reference import common, plain_torch
from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.results import read_rows
from trainspeed.bench.sweep import run_sweep
from trainspeed.cli import main
from trainspeed.workloads.mahjong.model import SIZES as TRAINSPEED_SIZES
from trainspeed.workloads.mahjong.model import MahjongPolicy
from trainspeed.workloads.mahjong.workload import MahjongWorkload

HERE = Path(__file__).resolve().parent


# --- (a), (b): parameters ------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_plain_torch_net_has_trainspeeds_parameters(size):
    ours = plain_torch.PolicyNet(common.SIZES[size])
    theirs = MahjongPolicy(TRAINSPEED_SIZES[size])
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    assert sorted_shapes(p.shape for p in ours.parameters()) == sorted_shapes(p.shape for p in theirs.parameters())
    assert {plain_torch_name(n): tuple(p.shape) for n, p in theirs.named_parameters()} == {
        n: tuple(p.shape) for n, p in ours.named_parameters()
    }


# --- (c): FLOPs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ALL_SIZES)
def test_plain_torch_flops_equal_trainspeeds(size):
    assert plain_torch.flops_for_size(size) == MahjongWorkload().flops_per_sample(size)


def test_a_peer_whose_net_is_not_the_workloads_is_refused_before_it_writes_a_row(capsys, tmp_path, monkeypatch):
    """Its rows would carry the workload's definition hash for other work (the 74-plane net's FLOPs)."""
    out = tmp_path / "rows.jsonl"
    monkeypatch.setattr(plain_torch, "flops_for_size", lambda size: 22_505_216)
    assert plain_torch.main(["--batch-sizes", "64", "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "22,505,216 FLOPs per sample at size tiny" in error[0]
    assert f"{MahjongWorkload().flops_per_sample('tiny'):,.0f}" in error[0] and not out.exists()


# --- (d): same network ------------------------------------------------------------------------


def test_plain_torch_net_with_trainspeeds_weights_gives_the_same_logits_loss_and_gradients():
    theirs = trainspeed_policy("tiny")
    ours = plain_torch.PolicyNet(common.SIZES["tiny"])
    ours.load_state_dict({plain_torch_name(n): v for n, v in theirs.state_dict().items()}, strict=True)
    data = batch()
    their_logits, their_loss = theirs(data["features"], data["mask"], data["action"])
    our_logits, our_loss = ours(data["features"], data["mask"], data["action"])
    legal = data["mask"]
    assert torch.equal(our_logits == common.ILLEGAL_LOGIT, ~legal)
    torch.testing.assert_close(our_logits[legal], their_logits[legal], rtol=0, atol=1e-5)
    torch.testing.assert_close(our_loss, their_loss, rtol=0, atol=1e-5)
    their_loss.backward()
    our_loss.backward()
    our_grads = dict(ours.named_parameters())
    for name, parameter in theirs.named_parameters():
        torch.testing.assert_close(our_grads[plain_torch_name(name)].grad, parameter.grad, rtol=0, atol=1e-5, msg=name)


# --- the command line and the timing --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--size", "huge"], "unknown size 'huge'"),
        (["--batch-sizes", "lots"], "--batch-sizes 'lots': give batch sizes"),
        (["--device", "tpu"], "unknown --device 'tpu'"),
        (["--precision", "fp16"], "unknown --precision 'fp16'"),
        (["--threads", "0"], "--threads must be positive"),
        (["--windows", "0"], "--windows must be >= 1"),
        (["--min-window-s", "0"], "--min-window-s must be positive"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_bad_flags_are_one_line_and_exit_code_2(capsys, tmp_path, argv, fragment):
    out = tmp_path / "rows.jsonl"
    assert plain_torch.main(["--out", str(out), *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("plain_torch.py: error:") and fragment in lines[0], lines
    assert not out.exists()


def test_a_peer_appends_only_to_a_file_of_bench_rows(capsys, tmp_path):
    """A run's metrics.jsonl is no place for a peer's bench rows: refused before anything is measured."""
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"kind": "train", "schema_version": 1, "step": 2}\n')
    assert plain_torch.main(["--batch-sizes", "64", "--out", str(metrics)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"--out {metrics}: line 1 is a 'train' row, not a 'bench' row" in lines[0], lines
    assert metrics.read_text() == '{"kind": "train", "schema_version": 1, "step": 2}\n'


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_cuda_device_is_a_usage_error(capsys, tmp_path):
    assert plain_torch.main(["--device", "cuda", "--out", str(tmp_path / "rows.jsonl")]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_every_timed_window_lasts_at_least_the_minimum():
    """A step that gets faster after warm-up makes the first windows short; they are redone longer."""
    calls = []

    def step() -> int:
        calls.append(None)
        time.sleep(0.05 if len(calls) <= 3 else 0.001)
        return len(calls)

    plan = common.WindowPlan(warmup_steps=2, windows=3, min_window_s=0.03)
    timing = common.time_windows(step, float, plan)
    assert timing.restarts >= 1
    assert len(timing.window_s) == 3 and min(timing.window_s) >= 0.03
    assert timing.steps_per_window > 1 and timing.compiles_in_windows == 0


# --- (e): rows that trainspeed reads and plots ----------------------------------------------------


def start_peer(script: str, out: Path) -> subprocess.Popen:
    command = [sys.executable, str(ROOT / "benchmarks" / "reference" / script), "--size", "tiny", "--batch-sizes", "64",
               "--windows", "1", "--min-window-s", "0.01", "--warmup-steps", "1", "--threads", "1", "--out", str(out)]
    return start_child(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.e2e
def test_peer_rows_share_a_file_and_a_plot_with_trainspeed_rows(tmp_path):
    out = tmp_path / "peers.jsonl"
    # The JAX peer runs in a process of its own (JAX is never imported here) beside the plain-PyTorch
    # peer and trainspeed's sweep, which run in this process (their imports are warm), one thread
    # each; every row is one whole-line append, and the test reads none of their speeds.
    peers = {}
    if _has_jax():
        peers["reference-jax:cpu:jit:fp32"] = start_peer("jax_optax.py", out)
    assert plain_torch.main(["--size", "tiny", "--batch-sizes", "64", "--windows", "1", "--min-window-s", "0.01",
                             "--warmup-steps", "1", "--threads", "1", "--out", str(out)]) == 0
    run_sweep(BenchConfig(workload="mahjong", size="tiny", targets=["cpu:eager:fp32"], batch_sizes=[64], out=out,
                          plan=TimingPlan(warmup_steps=1, windows=1, min_window_s=0.01), peak_tflops=1.0))
    for peer in peers.values():
        _, stderr = peer.communicate(timeout=180)
        assert peer.returncode == 0, stderr
    targets = {"cpu:eager:fp32", "reference-torch:cpu:eager:fp32", *peers}

    rows = read_rows(out)
    assert {row.target for row in rows} == targets
    assert all(row.status == "ok" and row.samples_per_s > 0 and row.batch_size == 64 for row in rows)
    assert len({row.flops_per_sample for row in rows}) == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    peer_records = [r for r in records if r["target"].startswith("reference-")]
    for record in peer_records:
        assert record["threads"] == 1 and record["implementation"].startswith("benchmarks/reference/")
        assert len(record["window_s"]) == 1 and record["window_s"][0] >= 0.01
        assert record["workload_sha256"] == records[-1]["workload_sha256"]  # trainspeed's Mahjong, the work they do
        assert record["machine"]["cores_usable"] >= 1 and record["machine"]["load_average_end"] is not None
    torch_versions = {r["machine"]["torch_version"] is None for r in peer_records}
    assert torch_versions == ({False, True} if _has_jax() else {False})
    assert all((r["machine"]["torch_threads"] is None) == (r["machine"]["torch_version"] is None) for r in peer_records)

    # `trainspeed plot OUT --baseline cpu:eager:fp32`, run in this process (its imports are warm; the
    # program's own entry, `python -m trainspeed`, ends its process, as every child command shows).
    assert main(["plot", str(out), "--baseline", "cpu:eager:fp32"]) == 0
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "reference-torch:cpu:eager:fp32" in out.with_suffix(".svg").read_text()


def _has_jax() -> bool:
    """Whether the JAX peer can run, without importing JAX here (see jax_peer_checks.py)."""
    return all(importlib.util.find_spec(name) is not None for name in ("jax", "optax"))


@pytest.mark.e2e
@pytest.mark.skipif(not _has_jax(), reason="jax is not installed: the JAX reference peer needs `pip install .[jax]`")
def test_the_jax_peer_checks_pass_in_a_process_of_their_own():
    # --noconftest: the suite's set-up (the XLA device registered, torch_xla imported) is nothing these
    # checks use, and would be most of the process's start.
    result = run_child([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
                        str(HERE / "jax_peer_checks.py")], timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
