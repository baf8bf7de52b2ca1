"""The JAX peer trains trainspeed's network: same parameters, FLOPs, logits, loss and gradients.

Run by `test_reference.py` in a pytest process of its own: JAX starts threads when imported, and
the data loaders of other tests fork, which must never happen beside those threads.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.reference import common
from peer_helpers import ALL_SIZES, batch, sorted_shapes, trainspeed_policy
from trainspeed.workloads.mahjong.model import SIZES as TRAINSPEED_SIZES
from trainspeed.workloads.mahjong.model import MahjongPolicy
from trainspeed.workloads.mahjong.workload import MahjongWorkload


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
        "tile_head": layer("tile_head"),
    }


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_jax_net_has_trainspeeds_parameters(jax_optax, size):
    shapes = jax_optax.param_shapes(common.SIZES[size])
    theirs = MahjongPolicy(TRAINSPEED_SIZES[size])
    assert sum(int(np.prod(s)) for s in shapes) == sum(p.numel() for p in theirs.parameters())
    assert sorted_shapes(shapes) == sorted_shapes(p.shape for p in theirs.parameters())


@pytest.mark.parametrize("size", ALL_SIZES)
def test_jax_flops_equal_trainspeeds(jax_optax, size):
    assert jax_optax.flops_for_size(size) == MahjongWorkload().flops_per_sample(size)


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


def _stream_adds(jax_optax, stream) -> list[str]:
    """Dtypes of the (batch, 34 tokens, width) adds in the peer's traced forward: the residual stream's."""
    import jax
    import jax.numpy as jnp

    size = common.SIZES["tiny"]
    data = batch()
    params = jax_optax.init_params(size, seed=0)
    jaxpr = jax.make_jaxpr(lambda p, f, m: jax_optax.forward(p, f, m, size, jnp.bfloat16, stream))(
        params, data["features"].numpy(), data["mask"].numpy())
    width = size.width
    return [str(eqn.outvars[0].aval.dtype) for eqn in jaxpr.eqns
            if eqn.primitive.name == "add" and eqn.outvars[0].aval.shape[1:] == (common.NUM_TILE_TYPES, width)]


def test_the_peers_bf16_stream_carries_the_residual_adds_in_bf16_and_its_default_in_fp32(jax_optax):
    import jax.numpy as jnp

    residual_adds = 1 + 2 * common.SIZES["tiny"].blocks  # the position embedding's, then two per block
    assert _stream_adds(jax_optax, jnp.float32).count("bfloat16") == 0
    assert _stream_adds(jax_optax, jnp.bfloat16).count("bfloat16") == residual_adds


def test_the_peers_bf16_stream_gives_the_fp32_peers_loss_within_bf16_rounding(jax_optax):
    import jax.numpy as jnp

    size = common.SIZES["tiny"]
    data = batch()
    params = jax_optax.init_params(size, seed=0)
    arrays = (params, data["features"].numpy(), data["mask"].numpy(), data["action"].numpy().astype(np.int32))
    exact = float(jax_optax.loss_fn(*arrays, size))
    streamed = float(jax_optax.loss_fn(*arrays, size, jnp.bfloat16, jnp.bfloat16))
    assert streamed == pytest.approx(exact, rel=2e-2)
    assert streamed != exact
