"""StyleGAN3 through the Workload protocol: batches, FLOPs, the step's phases, backends."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from child_commands import run_child, trainspeed_env
from PIL import Image

from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import Workload, WorkloadWithData
from trainspeed.workloads.stylegan3.configs import StyleGAN3Config, get_config
from trainspeed.workloads.stylegan3.dataset_tool import build_image_dataset
from trainspeed.workloads.stylegan3.workload import StyleGAN3Workload, build_trainable

SIZE = "tiny-t"
NARROW = dataclasses.replace(
    get_config(SIZE), num_layers=3, num_critical=1, z_dim=16, w_dim=16,
    g_channel_base=256, g_channel_max=8, d_channel_base=128, d_channel_max=16,
)  # fmt: skip
"""tiny-t's 32 px images and every kind of its layers (2x, 4x, the last crop) in 3 narrow layers:
for the tests whose cost grows with the network (dynamo traces every layer), and for those whose
subject is not the network's width: the step's phases, R1's interval and the EMA's rate stay
tiny-t's (`dataclasses.replace` keeps them). tiny-t itself trains in test_training.py."""


def cpu_trainable(size: str | StyleGAN3Config = SIZE, seed: int = 0):
    trainable = StyleGAN3Workload().build(size, seed) if isinstance(size, str) else build_trainable(size, seed)
    trainable.to(torch.device("cpu"))
    trainable.setup_optimizers()
    return trainable


def synthetic(batch_size: int = 4, seed: int = 0) -> dict:
    return StyleGAN3Workload().synthetic_batch(SIZE, batch_size, torch.Generator().manual_seed(seed))


def test_registered_and_implements_the_protocols():
    workload = get_workload("stylegan3")
    assert isinstance(workload, StyleGAN3Workload)
    assert isinstance(workload, Workload) and isinstance(workload, WorkloadWithData)
    assert workload.sizes[0] == "tiny-t" and {"t256", "r256", "t1024"} <= set(workload.sizes)


def test_synthetic_batch_is_compact_uint8_images():
    batch = synthetic(batch_size=3)
    assert set(batch) == {"images"}
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape == (3, 3, 32, 32)
    assert torch.equal(batch["images"], synthetic(batch_size=3)["images"])


def test_build_is_deterministic_per_seed():
    def weights(seed: int) -> torch.Tensor:
        return torch.cat([p.flatten() for p in StyleGAN3Workload().build(SIZE, seed).networks["G"].parameters()])

    assert torch.equal(weights(1), weights(1))
    assert not torch.equal(weights(1), weights(2))


def test_flops_per_image_are_counted_once_and_grow_with_the_model():
    workload = StyleGAN3Workload()
    tiny = workload.flops_per_sample("tiny-t")
    assert workload.flops_per_sample("tiny-t") == tiny
    t256 = workload.flops_per_sample("t256")
    # by hand: ~0.5 TFLOP per G forward image, four G-forward equivalents per step, plus D
    assert 1e12 < t256 < 5e12
    assert 0 < tiny < t256 / 100


def test_step_runs_the_phases_and_returns_a_detached_scalar():
    trainable = cpu_trainable(NARROW)
    assert trainable.trained_network_names() == ["G", "D"]
    assert set(trainable.networks) == {"G", "D", "G_ema"}
    ema_before = [p.clone() for p in trainable.networks["G_ema"].parameters()]
    loss = trainable.train_step(synthetic())
    assert loss.ndim == 0 and not loss.requires_grad and torch.isfinite(loss)
    assert set(trainable.last_losses) == {"G", "D", "R1"}  # step 0 runs R1
    torch.testing.assert_close(loss, trainable.last_losses["G"] + trainable.last_losses["D"])

    # G_ema moved a small fraction of the way from its old weights to G's new ones
    for old, new, target in zip(ema_before, trainable.networks["G_ema"].parameters(), trainable.networks["G"].parameters()):
        fraction = 1 - 0.5 ** (4 / (10_000 * 4 / 32))
        torch.testing.assert_close(new, old + fraction * (target - old))
    assert all(not p.requires_grad for p in trainable.networks["G_ema"].parameters())


def test_r1_runs_every_16th_step_and_the_counter_is_resumed():
    trainable = cpu_trainable(NARROW)
    ran_r1 = []
    for step in (0, 1, 16):
        trainable.step = step
        trainable.last_losses.clear()
        trainable.train_step(synthetic())
        ran_r1.append("R1" in trainable.last_losses)
    assert ran_r1 == [True, False, True]
    restored = cpu_trainable(NARROW, seed=5)
    restored.load_state_dict(trainable.state_dict())
    assert restored.step == 17


def test_wrong_image_size_is_a_usage_error():
    with pytest.raises(UsageError, match="--resolution 32"):
        cpu_trainable().train_step({"images": torch.zeros(2, 3, 64, 64, dtype=torch.uint8)})


def test_open_dataset_refuses_images_of_another_resolution_than_the_size(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for index in range(3):
        pixels = np.random.default_rng(index).integers(0, 256, (16, 16, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(source / f"image{index}.png")
    dataset = tmp_path / "small.zip"
    build_image_dataset(source, dataset, resolution=None)
    with pytest.raises(UsageError) as refused:
        StyleGAN3Workload().open_dataset(dataset, SIZE, LoaderConfig(batch_size=1, num_workers=0))
    message = str(refused.value)
    assert "\n" not in message
    assert "images are 16x16 but StyleGAN3 'tiny-t' trains on 32x32" in message
    assert "--resolution 32" in message


def test_step_under_bf16_autocast():
    trainable = cpu_trainable(NARROW)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = trainable.train_step(synthetic())
    assert torch.isfinite(loss)


@pytest.mark.slow
def test_step_through_torch_compile_without_graph_breaks():
    """aot_eager runs dynamo and AOTAutograd (which cannot double-backward) without codegen."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    trainable = cpu_trainable(NARROW)
    trainable.wrap(lambda network: torch.compile(network, backend="aot_eager", dynamic=False))
    losses = [trainable.train_step(synthetic(seed=s)) for s in range(2)]  # with and without R1
    assert all(torch.isfinite(loss) for loss in losses)
    assert sum(counters["graph_break"].values()) == 0
    torch._dynamo.reset()


@pytest.mark.e2e
@pytest.mark.slow
def test_step_on_xla_lowers_every_op():
    """One R1 step on the PJRT CPU client, with the target's recomputation: no op falls back to
    the host (aten:: counters). In a process of its own (xla_lowering_check.py), whose XLA compiles
    at LLVM's -O0: a 16 px, 3-layer network and the cheap codegen keep this test short."""
    pytest.importorskip("torch_xla")
    flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))
    env = trainspeed_env(XLA_FLAGS=flags)
    result = run_child([sys.executable, str(Path(__file__).with_name("xla_lowering_check.py"))], env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == []


def test_sizes_take_switches_and_name_the_bad_ones():
    from trainspeed.workloads.stylegan3.configs import get_config

    config = get_config("t256+channels-last+triton-lrelu+recompute-layer")
    assert (config.resolution, config.channels_last, config.lrelu_kernel, config.recompute) == (256, True, "triton", "layer")
    assert get_config("t256") == get_config("t256+recompute-activation")
    with pytest.raises(UsageError, match="unknown switch 'fast'"):
        get_config("t256+fast")
    with pytest.raises(UsageError, match="unknown StyleGAN3 size"):
        StyleGAN3Workload().build("t512+channels-last")
