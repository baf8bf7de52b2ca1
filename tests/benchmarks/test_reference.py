"""The reference peers train the same network as trainspeed and write rows trainspeed can read.

Same network is shown by parameter shapes and counts, by FLOPs per sample, and by copying
trainspeed's weights into each peer and getting the same logits, loss and gradients.
"""

import json
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.reference import common, plain_torch
from trainspeed.bench.results import read_rows
from trainspeed.bench.sweep import run_sweep
from trainspeed.bench.timing import TimingPlan
from trainspeed.bench.config import BenchConfig
from trainspeed.workloads.mahjong.model import SIZES as TRAINSPEED_SIZES
from trainspeed.workloads.mahjong.model import MahjongPolicy
from trainspeed.workloads.mahjong.workload import MahjongWorkload

ROOT = Path(__file__).resolve().parents[2]
ALL_SIZES = ("tiny", "small", "base", "large")

# trainspeed's parameter names -> plain_torch.py's: the same tensors under other names.
PLAIN_TORCH_NAMES = [
    (r"^position$", "pos_embed"),
    (r"^embed\.", "tile_embed."),
    (r"^blocks\.", "layers."),
    (r"\.ln_attn\.", ".norm1."),
    (r"\.attn\.proj\.", ".attn.out."),
    (r"\.ln_mlp\.", ".norm2."),
    (r"\.mlp\.fc\.", ".mlp_in."),
    (r"\.mlp\.proj\.", ".mlp_out."),
    (r"^ln_final\.", "norm_out."),
    (r"^head\.", "policy_head."),
]


def plain_torch_name(name: str) -> str:
    for pattern, replacement in PLAIN_TORCH_NAMES:
        name = re.sub(pattern, replacement, name)
    return name


def trainspeed_policy(size: str) -> MahjongPolicy:
    """trainspeed's net with every parameter perturbed, so LayerNorm gains and the (zero-initialised)
    position embedding matter too and a peer that drops or misplaces one cannot match."""
    torch.manual_seed(0)
    policy = MahjongPolicy(TRAINSPEED_SIZES[size])
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return policy


def sorted_shapes(shapes) -> list[tuple[int, ...]]:
    return sorted(tuple(shape) for shape in shapes)


def batch(batch_size: int = 16):
    return MahjongWorkload().synthetic_batch("tiny", batch_size, torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def jax_optax():
    pytest.importorskip("jax", reason="jax is not installed: the JAX reference peer needs `pip install .[jax]`")
    pytest.importorskip("optax", reason="optax is not installed: the JAX reference peer needs `pip install .[jax]`")
    from benchmarks.reference import jax_optax

    return jax_optax


def jax_tree(named: dict[str, torch.Tensor], blocks: int) -> dict:
    """trainspeed's named tensors (weights or gradients) laid out as the JAX peer's parameter tree;
    both keep torch's (out, in) weight layout."""
    import jax.numpy as jnp

    def layer(prefix: str) -> dict:
        return {"weight": jnp.asarray(named[f"{prefix}.weight"].detach().numpy()),
                "bias": jnp.asarray(named[f"{prefix}.bias"].detach().numpy())}

    return {
        "embed": layer("embed"),
        "position": jnp.asarray(named["position"].detach().numpy()),
        "blocks": [
            {
                "attn_norm": layer(f"blocks.{i}.ln_attn"),
                "qkv": layer(f"blocks.{i}.attn.qkv"),
                "attn_out": layer(f"blocks.{i}.attn.proj"),
                "mlp_norm": layer(f"blocks.{i}.ln_mlp"),
                "mlp_in": layer(f"blocks.{i}.mlp.fc"),
                "mlp_out": layer(f"blocks.{i}.mlp.proj"),
            }
            for i in range(blocks)
        ],
        "final_norm": layer("ln_final"),
        "head": layer("head"),
    }


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


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_jax_net_has_trainspeeds_parameters(jax_optax, size):
    shapes = jax_optax.param_shapes(common.SIZES[size])
    theirs = MahjongPolicy(TRAINSPEED_SIZES[size])
    assert sum(int(np.prod(s)) for s in shapes) == sum(p.numel() for p in theirs.parameters())
    assert sorted_shapes(shapes) == sorted_shapes(p.shape for p in theirs.parameters())


# --- (c): FLOPs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ALL_SIZES)
def test_plain_torch_flops_equal_trainspeeds(size):
    assert plain_torch.flops_for_size(size) == MahjongWorkload().flops_per_sample(size)


@pytest.mark.parametrize("size", ALL_SIZES)
def test_jax_flops_equal_trainspeeds(jax_optax, size):
    assert jax_optax.flops_for_size(size) == MahjongWorkload().flops_per_sample(size)


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


def test_jax_net_with_trainspeeds_weights_gives_the_same_logits_loss_and_gradients(jax_optax):
    import jax

    theirs = trainspeed_policy("tiny")
    size = common.SIZES["tiny"]
    params = jax_tree(dict(theirs.named_parameters()), size.blocks)
    own = jax_optax.init_params(size, seed=0)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(own)
    assert jax.tree_util.tree_map(lambda a: a.shape, params) == jax.tree_util.tree_map(lambda a: a.shape, own)

    data = batch()
    features, mask = data["features"].numpy(), data["mask"].numpy()
    action = data["action"].numpy().astype(np.int32)
    their_logits, their_loss = theirs(data["features"], data["mask"], data["action"])

    def loss_and_logits(params, features, mask, action):
        logits = jax_optax.forward(params, features, mask, size)
        return jax_optax.cross_entropy(logits, action), logits

    (our_loss, our_logits), our_grads = jax.jit(jax.value_and_grad(loss_and_logits, has_aux=True))(
        params, features, mask, action
    )
    our_logits = np.asarray(our_logits)
    np.testing.assert_array_equal(our_logits == common.ILLEGAL_LOGIT, ~mask)
    np.testing.assert_allclose(our_logits[mask], their_logits.detach().numpy()[mask], rtol=0, atol=1e-4)
    assert float(our_loss) == pytest.approx(their_loss.item(), abs=1e-4)
    their_loss.backward()
    their_grads = jax_tree({name: p.grad for name, p in theirs.named_parameters()}, size.blocks)
    assert jax.tree_util.tree_structure(our_grads) == jax.tree_util.tree_structure(their_grads)
    for (path, ours_grad), their_grad in zip(
        jax.tree_util.tree_leaves_with_path(our_grads), jax.tree_util.tree_leaves(their_grads)
    ):
        np.testing.assert_allclose(np.asarray(ours_grad), np.asarray(their_grad), rtol=0, atol=1e-4, err_msg=str(path))


# --- the command line and the timing --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--size", "huge"], "unknown size 'huge'"),
        (["--batch-sizes", "lots"], "bad --batch-sizes"),
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
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_peer_rows_share_a_file_and_a_plot_with_trainspeed_rows(tmp_path, monkeypatch):
    out = tmp_path / "peers.jsonl"
    # The peers run side by side (one thread each) and beside trainspeed's sweep, to keep the test
    # short; every row is one whole-line append, and the test reads none of their speeds.
    peers = {"reference-torch:cpu:eager:fp32": start_peer("plain_torch.py", out)}
    if _has_jax():
        peers["reference-jax:cpu:jit:fp32"] = start_peer("jax_optax.py", out)
    run_sweep(BenchConfig(workload="mahjong", size="tiny", targets=["cpu:eager:fp32"], batch_sizes=[64], out=out,
                          plan=TimingPlan(warmup_steps=1, windows=1, min_window_s=0.01), peak_tflops=1.0))
    for peer in peers.values():
        _, stderr = peer.communicate(timeout=180)
        assert peer.returncode == 0, stderr
    targets = {"cpu:eager:fp32", *peers}

    rows = read_rows(out)
    assert {row.target for row in rows} == targets
    assert all(row.status == "ok" and row.samples_per_s > 0 and row.batch_size == 64 for row in rows)
    assert len({row.flops_per_sample for row in rows}) == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    peer_records = [r for r in records if r["target"].startswith("reference-")]
    for record in peer_records:
        assert record["threads"] == 1 and record["implementation"].startswith("benchmarks/reference/")
        assert len(record["window_s"]) == 1 and record["window_s"][0] >= 0.01
    assert {r["torch_version"] is None for r in peer_records} == ({False, True} if _has_jax() else {False})

    # `python -m trainspeed plot OUT --baseline cpu:eager:fp32`, run in this process (its imports are warm).
    monkeypatch.setattr(sys, "argv", ["trainspeed", "plot", str(out), "--baseline", "cpu:eager:fp32"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("trainspeed", run_name="__main__", alter_sys=True)
    assert exit_info.value.code == 0
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "reference-torch:cpu:eager:fp32" in out.with_suffix(".svg").read_text()


def _has_jax() -> bool:
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError:
        return False
    return True
