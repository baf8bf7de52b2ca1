"""The policy's speed switches compute the same function as the plain model, and the reported
FLOPs stay the analytic count of the model's own shapes."""

import copy

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.errors import UsageError
from trainspeed.workloads import get_workload
from trainspeed.workloads.mahjong.model import SIZES, MahjongPolicy, policy_config, segment_softmax

# Switches that run on the host CPU; sdpa-efficient and sdpa-cudnn exist only on CUDA.
HOST_SWITCHES = ["bf16-stream", "pad-matmuls", "attn-sdpa-math", "attn-sdpa-flash", "attn-explicit",
                 "attn-packed-heads", "attn-fused-qkv", "flat-tokens"]
CUDA_ONLY_SWITCHES = ["attn-sdpa-efficient", "attn-sdpa-cudnn"]
EXACT_IN_FP32 = {"bf16-stream"}  # the same ops in the same order without autocast


def _models(size: str, seed: int = 0) -> tuple[MahjongPolicy, MahjongPolicy]:
    """The plain model and the variant with identical parameters (same seed, same shapes)."""
    torch.manual_seed(seed)
    plain = MahjongPolicy(SIZES[size.split("+")[0]])
    torch.manual_seed(seed)
    variant = MahjongPolicy(policy_config(size))
    for (name, a), (_, b) in zip(plain.state_dict().items(), variant.state_dict().items()):
        assert torch.equal(a, b), name
    return plain, variant


def _run(model: MahjongPolicy, batch, autocast: bool = False):
    """Logits, loss and every parameter gradient of one forward and backward."""
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits, loss = model(batch["features"], batch["mask"], batch["action"])
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def _batch(seed: int = 3, batch_size: int = 16):
    return get_workload("mahjong").synthetic_batch("tiny", batch_size, torch.Generator().manual_seed(seed))


def test_sizes_take_switches_and_name_the_bad_ones():
    workload = get_workload("mahjong")
    assert "base-fast" in workload.sizes
    assert workload.sizes.index("base") < workload.sizes.index("base-fast") < workload.sizes.index("large")
    config = policy_config("small+bf16-stream+attn-explicit")
    assert (config.width, config.bf16_stream, config.attention, config.pad_matmuls) == (256, True, "explicit", False)
    fast = policy_config("base-fast")
    assert fast.bf16_stream and fast.pad_matmuls and (fast.width, fast.blocks) == (512, 8)
    with pytest.raises(UsageError, match="unknown switch 'fp8'"):
        policy_config("base+fp8")
    with pytest.raises(UsageError, match="unknown mahjong size 'huge'.*base-fast"):
        workload.build("huge")


@pytest.mark.parametrize("switch", HOST_SWITCHES + ["bf16-stream+pad-matmuls+attn-explicit"])
def test_switches_compute_the_same_function_in_fp32(switch):
    plain, variant = _models(f"tiny+{switch}")
    batch = _batch()
    logits0, loss0, grads0 = _run(plain, batch)
    logits1, loss1, grads1 = _run(variant, batch)
    if switch in EXACT_IN_FP32:
        assert torch.equal(logits1, logits0) and torch.equal(loss1, loss0)
        assert all(torch.equal(grads1[name], grads0[name]) for name in grads0)
        return
    torch.testing.assert_close(logits1, logits0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss1, loss0, rtol=1e-5, atol=1e-6)
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], rtol=1e-4, atol=1e-6, msg=name)


def test_packed_heads_in_several_groups_compute_the_same_function_in_fp32():
    """Heads of 64 packed in pairs, two groups of them (Mahjong base's heads; tiny's two heads of
    32 make one group): the same logits, loss and gradients as one head at a time."""
    plain, variant = _models("small+attn-packed-heads")
    batch = _batch(batch_size=4)
    logits0, loss0, grads0 = _run(plain, batch)
    logits1, loss1, grads1 = _run(variant, batch)
    torch.testing.assert_close(logits1, logits0, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss1, loss0, rtol=1e-5, atol=1e-6)
    for name in grads0:
        torch.testing.assert_close(grads1[name], grads0[name], rtol=1e-4, atol=1e-6, msg=name)


def test_segment_softmax_is_a_softmax_per_segment_each_shifted_by_its_own_maximum():
    """One segment's scores 200 above the other's: a shift shared by both would underflow the
    lower segment to 0/0."""
    scores = torch.randn(3, 5, 2 * 34)
    scores[..., :34] += 200.0
    expected = scores.view(3, 5, 2, 34).softmax(dim=-1).view(3, 5, 68)
    torch.testing.assert_close(segment_softmax(scores, 2), expected)
    torch.testing.assert_close(segment_softmax(scores[..., :34], 1), scores[..., :34].softmax(dim=-1))


def test_a_variant_takes_switches_after_its_name():
    packed = policy_config("base-fast+attn-packed-heads")
    assert packed.bf16_stream and packed.pad_matmuls and packed.attention == "packed-heads"
    assert policy_config("base+attn-packed-heads").attention == "packed-heads"
    workload = get_workload("mahjong")
    assert workload.flops_per_sample("base-fast+attn-packed-heads") == workload.flops_per_sample("base")
    with pytest.raises(UsageError, match="unknown switch 'fp8'"):
        policy_config("base-fast+fp8")


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.float() - expected.float()).norm() / expected.float().norm().clamp_min(1e-12))


@pytest.mark.parametrize("switch", HOST_SWITCHES + ["bf16-stream+pad-matmuls", "bf16-stream+pad-matmuls+attn-fused-qkv+flat-tokens"])
def test_switches_stay_within_bf16_error_under_autocast(switch):
    """Under bf16 autocast the variant is as close to the fp32 model as the plain model is: its
    logits, loss and gradients differ from fp32 by at most twice the plain model's difference
    (plus bf16's rounding step), and from the plain model by no more than bf16 allows."""
    plain, variant = _models(f"tiny+{switch}")
    batch = _batch()
    reference = _run(plain, batch)
    plain_bf16 = _run(plain, batch, autocast=True)
    variant_bf16 = _run(variant, batch, autocast=True)
    legal = batch["mask"]
    for index, what in ((0, "logits"), (1, "loss")):
        expected, base, actual = reference[index], plain_bf16[index], variant_bf16[index]
        if what == "logits":
            expected, base, actual = expected[legal], base[legal], actual[legal]
        assert _relative_error(actual, expected) <= 2 * _relative_error(base, expected) + 2**-8, what
        assert _relative_error(actual, base) <= 2**-5, what
    for name in reference[2]:
        expected, base, actual = reference[2][name], plain_bf16[2][name], variant_bf16[2][name]
        assert _relative_error(actual, expected) <= 2 * _relative_error(base, expected) + 2**-7, name
        assert _relative_error(actual, base) <= 2**-4, name


def test_bf16_stream_keeps_blocks_in_bf16_under_autocast():
    plain, variant = _models("tiny+bf16-stream")
    batch = _batch()
    seen = {}
    for label, model in (("plain", plain), ("variant", variant)):
        model.blocks[0].register_forward_hook(lambda module, args, out, label=label: seen.__setitem__(label, out.dtype))
        model.ln_final.register_forward_hook(
            lambda module, args, out, label=label: seen.__setitem__(f"{label} ln", out.dtype)
        )
        _run(model, batch, autocast=True)
    assert seen == {"plain": torch.float32, "plain ln": torch.float32,
                    "variant": torch.bfloat16, "variant ln": torch.bfloat16}
    # the parameters stay fp32 (the optimizer updates fp32 weights)
    assert all(p.dtype == torch.float32 for p in variant.parameters())


@pytest.mark.parametrize("switch", CUDA_ONLY_SWITCHES)
def test_cuda_only_attention_backends(switch):
    if not torch.cuda.is_available():
        pytest.skip(f"{switch} runs only on CUDA (no CUDA device here); the GPU script measures it")
    plain, variant = _models(f"tiny+{switch}")
    plain, variant = plain.cuda(), variant.cuda()
    batch = {key: value.cuda() for key, value in _batch().items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits0, _ = plain(batch["features"], batch["mask"])
        logits1, _ = variant(batch["features"], batch["mask"])
    legal = batch["mask"]
    assert _relative_error(logits1[legal], logits0[legal]) <= 2**-5


@pytest.mark.parametrize("switch", HOST_SWITCHES + ["compiled-adamw"])
def test_switches_report_the_analytic_flops(switch):
    workload = get_workload("mahjong")
    assert workload.flops_per_sample(f"tiny+{switch}") == workload.flops_per_sample("tiny")
    assert workload.flops_per_sample("base-fast") == workload.flops_per_sample("base")


def test_padding_does_more_matmul_work_than_is_reported():
    """The counter sees the padded head and embedding multiply by zeros; the row does not count them."""
    workload = get_workload("mahjong")
    batch = _batch(batch_size=4)
    counted = {}
    for size in ("tiny", "tiny+pad-matmuls"):
        model = _models(size)[1]
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            _, loss = model(batch["features"], batch["mask"], batch["action"])
            loss.backward()
        counted[size] = counter.get_total_flops() / 4
    assert counted["tiny"] == pytest.approx(workload.flops_per_sample("tiny+pad-matmuls"), rel=1e-6)
    assert counted["tiny+pad-matmuls"] > counted["tiny"]


@pytest.mark.slow
def test_compiled_adamw_takes_the_same_steps_as_eager_adamw():
    """From the same weights and batch both runs compute the same gradients, so after one step the
    weights differ only by how the two optimizer kernels round the same update (a few float32 ulps
    of a step of at most lr). Later steps are not compared weight by weight: a parameter whose
    exact gradient is zero (the key bias: softmax ignores a shift shared by every score) gets
    rounding noise as its gradient, and Adam turns noise of either sign into a full step of +-lr,
    so once the weights differ by one ulp the two runs may step such a parameter apart."""
    workload = get_workload("mahjong")
    plain, compiled = workload.build("tiny", seed=0), workload.build("tiny+compiled-adamw", seed=0)
    for trainable in (plain, compiled):
        trainable.setup_optimizers()
    batch = _batch()
    losses = [float(trainable.train_step(batch)) for trainable in (plain, compiled)]
    assert losses[1] == losses[0]
    lr = plain.optimizers["policy"].param_groups[0]["lr"]
    for (name, a), b in zip(plain.networks["policy"].named_parameters(), compiled.networks["policy"].parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=lr * 1e-5, msg=name)
    # a schedule's float learning rate goes back to a tensor instead of recompiling the step
    compiled.optimizers["policy"].param_groups[0]["lr"] = 1e-4
    plain.optimizers["policy"].param_groups[0]["lr"] = 1e-4
    losses = [float(trainable.train_step(batch)) for trainable in (plain, compiled)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert isinstance(compiled.optimizers["policy"].param_groups[0]["lr"], torch.Tensor)


@pytest.mark.slow
def test_switches_compile_into_one_graph():
    """torch.compile takes every switch without a graph break (sdpa_kernel inside forward too).
    Graph breaks are the capture's (Dynamo's): the eager backend runs the captured graph as it is,
    without the seconds of AOT autograd's tracing that a backend adds after the capture."""
    model = _models("tiny+bf16-stream+pad-matmuls+attn-sdpa-math")[1]
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    batch = _batch()
    for autocast in (False, True):
        expected = _run(eager, batch, autocast)
        actual = _run(compiled, batch, autocast)
        torch.testing.assert_close(actual[1], expected[1], rtol=1e-5, atol=1e-5)
