"""`F.scaled_dot_product_attention` on the jax family: PyTorch's outputs and gradients with every
kind of mask, grouped-query heads and a given scale (XLA's attention, on this CPU); on a TPU the
same call lowers to JAX's Pallas flash attention kernel, which an export for the TPU shows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_and_jax import assert_same, environment

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))

BATCH, HEADS, TOKENS, WIDTH = 2, 3, 5, 8


def qkv(heads: int = HEADS, keys: int = TOKENS, kv_heads: int | None = None) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, heads, TOKENS, WIDTH, generator=generator),
            torch.randn(BATCH, kv_heads or heads, keys, WIDTH, generator=generator),
            torch.randn(BATCH, kv_heads or heads, keys, WIDTH, generator=generator))


def key_padding() -> torch.Tensor:
    mask = torch.ones(BATCH, 1, 1, TOKENS, dtype=torch.bool)
    mask[1, ..., 3:] = False
    return mask


@pytest.mark.parametrize("case", ["plain", "causal", "key-padding", "full-bool", "bias", "scale", "keys-longer"])
def test_attention_matches_pytorch(case: str) -> None:
    generator = torch.Generator().manual_seed(1)
    masks = {"key-padding": key_padding(),
             "full-bool": torch.rand(BATCH, HEADS, TOKENS, TOKENS, generator=generator) > 0.3,
             "bias": torch.randn(1, HEADS, TOKENS, TOKENS, generator=generator)}
    mask = masks.get(case)
    if case == "full-bool":
        mask[..., 0] = True  # no query row masked whole (PyTorch gives NaN there)
    keyword = dict(is_causal=case == "causal", scale=0.3 if case == "scale" else None)
    inputs = qkv(keys=TOKENS + 3) if case == "keys-longer" else qkv()
    if mask is None:
        assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **keyword), *inputs)
    else:  # the mask an input of the step too, as a model's own mask is (a bias gets its gradient checked)
        assert_same(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **keyword), *inputs, mask)


def test_grouped_query_attention_matches_pytorch() -> None:
    assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                *qkv(heads=4, kv_heads=2))


def test_unbatched_and_extra_leading_dimensions_match_pytorch() -> None:
    q, k, v = qkv()
    assert_same(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q[0], k[0], v[0])
    five_dimensional = [value[None].expand(2, -1, -1, -1, -1).contiguous() for value in (q, k, v)]
    assert_same(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), *five_dimensional,
                key_padding()[:1])


def test_dropout_draws_a_mask_from_the_step_s_key() -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    env = environment()
    q, k, v = (Tensor(jnp.asarray(value.numpy()), env) for value in qkv())
    with env:
        dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)._elem
        again = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)._elem
        plain = F.scaled_dot_product_attention(q, k, v)._elem
    assert np.isfinite(np.asarray(dropped)).all()
    assert not np.allclose(dropped, plain) and not np.allclose(dropped, again)


def exported_for_tpu(dropout_p: float, tokens: int, mask: torch.Tensor | None = None) -> str:
    import jax
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    env = environment()

    def attend(q, k, v):
        # the step's own key, as the jax family binds one per traced step (rotating the environment's
        # global key inside a trace would leave a tracer there)
        with env, env.override_property(prng=jax.random.PRNGKey(0)):
            own_mask = None if mask is None else Tensor(jnp.asarray(mask.numpy()), env)
            return F.scaled_dot_product_attention(Tensor(q, env), Tensor(k, env), Tensor(v, env), attn_mask=own_mask,
                                                  dropout_p=dropout_p, is_causal=mask is None)._elem

    spec = jax.ShapeDtypeStruct((2, 4, tokens, 64), jnp.bfloat16)
    return jax.export.export(jax.jit(jax.grad(lambda q, k, v: attend(q, k, v).astype("float32").sum())),
                             platforms=["tpu"])(spec, spec, spec).mlir_module()


def test_on_a_tpu_attention_lowers_to_the_flash_kernel_forward_and_backward() -> None:
    program = exported_for_tpu(0.0, 1024)
    assert program.count("tpu_custom_call") >= 2, "the flash kernel's forward and backward"
    assert "flash" in program


def test_a_length_no_multiple_of_128_and_a_padding_mask_still_reach_the_kernel() -> None:
    mask = torch.ones(2, 1, 1, 600, dtype=torch.bool)
    assert exported_for_tpu(0.0, 600, mask).count("tpu_custom_call") >= 2


def test_attention_dropout_and_short_sequences_stay_on_xla_s_attention_on_a_tpu() -> None:
    assert "tpu_custom_call" not in exported_for_tpu(0.1, 1024)
    assert "tpu_custom_call" not in exported_for_tpu(0.0, 197)
