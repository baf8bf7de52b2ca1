"""The transformer peers are the networks trainspeed trains (the same parameter count as the
library's model, layer for layer), and their step trains."""

from __future__ import annotations

import dataclasses
import importlib.util
import math

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("optax") is None,
                                reason="the peers need jax and optax")


def peer_parameters(name: str) -> int:
    import jax

    from benchmarks.reference.jax_transformers import MODELS, init_params

    shapes = jax.eval_shape(lambda: init_params(MODELS[name], jax.random.PRNGKey(0)))
    return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes))


@pytest.mark.parametrize("name, library", [("gpt2", "transformers"), ("vit_s16", "timm")])
def test_a_peer_has_the_parameters_of_trainspeed_s_model(name: str, library: str) -> None:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    import torch

    from benchmarks.reference.jax_transformers import MODELS
    from trainspeed.workloads import get_workload, resolve_size

    model = MODELS[name]
    workload = get_workload(model.workload)
    size = resolve_size(workload, model.size)
    with torch.device("meta"):
        network = next(iter(workload.build(size, seed=0).networks.values()))
    assert peer_parameters(name) == sum(parameter.numel() for parameter in network.parameters())


@pytest.mark.parametrize("name", ["gpt2", "vit_s16"])
def test_a_small_peer_s_step_trains(name: str) -> None:
    import jax

    from benchmarks.reference import jax_transformers as peer
    from benchmarks.reference.common import WindowPlan

    small = dataclasses.replace(peer.MODELS[name], layers=2, width=32, heads=2, mlp=64,
                                tokens=17 if name == "vit_s16" else 16, vocabulary=50, resolution=64)
    optimizer = peer._optimizer(small)
    params = peer.init_params(small, jax.random.PRNGKey(0))
    state = optimizer.init(params)
    batch = peer.synthetic_batch(small, 4, 0)
    step = peer.train_step(small, optimizer, jax.numpy.float32)
    losses = []
    for _ in range(4):
        params, state, loss = step(params, state, batch)
        losses.append(float(loss))
    assert all(math.isfinite(value) for value in losses) and losses[-1] < losses[0], losses
    assert peer.measure(small, 2, "fp32", WindowPlan(warmup_steps=1, windows=1, min_window_s=0.01), 0).window_s


@pytest.mark.e2e
def test_the_peer_imports_no_torch(tmp_path) -> None:
    """It runs on the TPU host, where no torch is: its imports (trainspeed's rows, its lowerings'
    files) must not reach torch."""
    import subprocess

    from without_torch import script_without_torch

    done = subprocess.run(script_without_torch("benchmarks/reference/jax_transformers.py", "--help"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--flops-from" in done.stdout, done.stderr[-2000:]
