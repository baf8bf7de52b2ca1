"""The jax family's lowering of `trainspeed::qkv_attention`: the Pallas kernels (run here in Pallas'
interpreter) give jax.numpy's outputs and gradients, a Mahjong step with the switch trains as the
plain step does on this CPU (where the op lowers to jax.numpy), and a step exported for a TPU
holds the kernels while one for the CPU does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("bfloat16", 2e-2)])
@pytest.mark.parametrize("batch", [8, 6])
def test_the_kernels_give_the_outputs_and_gradients_of_jax_numpy(dtype: str, tolerance: float, batch: int) -> None:
    import jax
    import jax.numpy as jnp

    from trainspeed.targets.jaxjit.qkv_attention import attention_kernels, attention_reference

    heads, dim, tokens = 2, 32, 34
    qkv = jax.random.normal(jax.random.key(0), (batch, tokens, 3 * heads * dim)).astype(dtype)
    probe = jax.random.normal(jax.random.key(1), (batch, tokens, heads * dim))

    def output_and_gradient(attention):
        def loss(x):
            return jnp.sum(attention(x).astype(jnp.float32) * probe)
        return attention(qkv), jax.grad(loss)(qkv)

    out, grad = output_and_gradient(lambda x: attention_kernels(x, heads, interpret=True))
    expected_out, expected_grad = output_and_gradient(lambda x: attention_reference(x, heads))
    for actual, expected in ((out, expected_out), (grad, expected_grad)):
        actual, expected = actual.astype(jnp.float32), expected.astype(jnp.float32)
        assert float(jnp.max(jnp.abs(actual - expected))) <= tolerance * float(jnp.max(jnp.abs(expected)))
    assert float(jnp.max(jnp.abs(grad.astype(jnp.float32)))) > 0


def test_blocks_hold_whole_samples_that_divide_the_batch_within_the_byte_budget() -> None:
    from trainspeed.targets.jaxjit.qkv_attention import BLOCK_BYTES, samples_per_block

    assert samples_per_block(4096, 34, 1536, 2) == 16
    assert samples_per_block(4096, 34, 1536, 4) == 8  # 16 fp32 samples exceed BLOCK_BYTES
    assert samples_per_block(6, 34, 1536, 2) == 2
    assert samples_per_block(7, 34, 1536, 2) == 1
    assert 8 * 34 * 1536 * 4 <= BLOCK_BYTES < 16 * 34 * 1536 * 4


def test_a_mahjong_step_with_the_switch_trains_as_the_plain_step() -> None:
    from test_same_losses import losses

    assert losses("jax:jit:fp32", "mahjong", size="tiny+attn-fused-qkv") == pytest.approx(
        losses("jax:jit:fp32", "mahjong", size="tiny"), rel=1e-5)


def test_an_export_for_a_tpu_holds_the_kernels_and_one_for_the_cpu_does_not(tmp_path: Path) -> None:
    import jax

    from trainspeed.cli import main

    texts = {}
    for platform in ("tpu", "cpu"):
        out = tmp_path / platform
        main(["export", "--workload", "mahjong", "--size", "tiny+attn-fused-qkv", "--target", "jax:jit:bf16",
              "--platform", platform, "--batch-sizes", "8", "--out", str(out)])
        texts[platform] = jax.export.deserialize(bytearray((out / "train_b8.jaxexport").read_bytes())).mlir_module()
    assert texts["tpu"].count("tpu_custom_call") == 2 * 2  # forward and backward kernels of both blocks
    assert "tpu_custom_call" not in texts["cpu"]
