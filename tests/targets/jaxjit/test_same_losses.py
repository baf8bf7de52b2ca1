"""The jax family runs the workload's own PyTorch step, traced into one JAX program: the same
network, loss and optimizer update as eager PyTorch. So N steps on one fixed batch give the losses
`cpu:eager:fp32` gives, to float rounding, and bf16 trains too.

Tolerance: relative 1e-5 per step. Each step moves the loss by 0.4% to 5%, so a step that drops
the update, applies it twice or trains another model is off by hundreds of tolerances, while
the two float32 implementations of the same ops (XLA's and ATen's kernels, summing in other
orders) agree to ~1e-6. JAX's matmuls are pinned to full float32 (`jax.default_matmul_precision`):
on the CPU that is already JAX's default, but on a TPU the default runs float32 matmuls as bfloat16
passes, which would be a precision difference, not a tracing one.
"""

from __future__ import annotations

import math
from typing import Callable

import pytest
import torch
from child_commands import EXAMPLES
from toy_workload import ToyClassifier, ToyWorkload

from trainspeed.targets import get_target
from trainspeed.errors import UsageError
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.train.config import LRConfig
from trainspeed.train.lr_schedule import build_schedulers
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import Workload

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    # JAX without x64 holds the workloads' int64 index tensors as int32 (their values fit), and says so.
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

STEPS, BATCH, RELATIVE = 6, 16, 1e-5

@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The char-LM example is named as the CLI names it with PYTHONPATH=examples."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


def losses(target_name: str, workload: str | Workload, steps: int = STEPS, size: str = "tiny",
           schedule: LRConfig | None = None) -> list[float]:
    """`steps` steps of a fresh trainable (seed 0) on one fixed synthetic batch (seed 0), through
    the Target API as the bench drives it; with `schedule`, each step at the learning rates the
    trainer's schedulers give its optimizers' groups (warm-up, then cosine). The losses are read
    once, after the last step, by a torch op on all of them: the jax family's losses are pending
    until read."""
    import jax

    workload = get_workload(workload) if isinstance(workload, str) else workload
    target = get_target(target_name)
    with jax.default_matmul_precision("float32"):
        trainable = target.build(workload, size, 0)
        schedulers = build_schedulers(trainable.optimizers, schedule, BATCH, steps) if schedule else {}
        batch = target.move_batch(workload.synthetic_batch(size, BATCH, torch.Generator().manual_seed(0)))
        returned = []
        for _ in range(steps):
            returned.append(target.run_step(trainable, batch))
            for scheduler in schedulers.values():
                scheduler.step()
        values = torch.stack(returned).tolist()
    target.sync()
    return values


def assert_same_losses(workload: str | Workload) -> None:
    eager = losses("cpu:eager:fp32", workload)
    traced = losses("jax:jit:fp32", workload)
    assert eager[-1] < eager[0], eager  # the batch is learnable: equal losses mean equal updates
    assert traced == pytest.approx(eager, rel=RELATIVE), (traced, eager)


@pytest.mark.parametrize("workload_name", [
    "mahjong",
    "char_lm_workload:CharLMWorkload",
    "toy_workload:ToyWorkload",
    "toy_workload:with_adamw",
])
def test_jax_steps_give_the_losses_of_eager_pytorch(examples_on_path, workload_name: str) -> None:
    assert_same_losses(workload_name)


def test_a_schedule_s_learning_rates_reach_the_jax_step() -> None:
    """The rates are an input of the compiled step, read from the optimizers' groups at each step:
    under a warm-up and a cosine the jax steps give eager's losses, which the schedule moves far
    from the constant rate's (a step that kept the rate it was traced at would train at those)."""
    schedule = LRConfig(scaling="none", warmup_steps=2, min_lr_ratio=0.05)
    eager = losses("cpu:eager:fp32", "mahjong", schedule=schedule)
    traced = losses("jax:jit:fp32", "mahjong", schedule=schedule)
    constant = losses("cpu:eager:fp32", "mahjong")
    assert abs(eager[-1] - constant[-1]) > 100 * RELATIVE * constant[-1], (eager, constant)
    assert traced == pytest.approx(eager, rel=RELATIVE), (traced, eager)


def _toy_trained_with(make: Callable[..., torch.optim.Optimizer]) -> ToyWorkload:
    class Trained(ToyClassifier):
        def setup_optimizers(self, fused: bool = False) -> None:
            self.optimizers = {"net": make(self.networks["net"].parameters())}

    return ToyWorkload("toy-optimizer", trainable=Trained)


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), id="SGD-nesterov"),
    pytest.param(lambda p: torch.optim.Adam(p, lr=0.01), id="Adam"),
    pytest.param(lambda p: torch.optim.RAdam(p, lr=0.01), id="RAdam"),
])
def test_each_optimizer_the_family_steps_updates_as_torch_does(make) -> None:
    """The family steps the workload's own torch optimizers on traced tensors, with the state made
    before the first step (`FRESH_STATE_IS_ZERO` names those it steps)."""
    assert_same_losses(_toy_trained_with(make))


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: torch.optim.RMSprop(p, lr=0.01), id="RMSprop"),
    pytest.param(lambda p: torch.optim.Adamax(p, lr=0.01), id="Adamax"),
])
def test_an_optimizer_the_family_does_not_step_is_refused_in_one_line(make) -> None:
    """RMSprop reads a value on the host in its update and Adamax calls an op torchax lacks: each
    is refused by name before any step, not traced into a wrong update."""
    with pytest.raises(UsageError, match=r"is a (RMSprop|Adamax); the jax family steps Adam, AdamW, SGD, RAdam$"):
        get_target("jax:jit:fp32").build(_toy_trained_with(make), "tiny", seed=0)


def test_bf16_losses_are_finite_and_fall() -> None:
    traced = losses("jax:jit:bf16", "mahjong")
    assert all(math.isfinite(loss) for loss in traced), traced
    assert traced[-1] < traced[0] - 0.05, traced


def test_bf16_computes_a_linear_layer_in_bfloat16() -> None:
    """The toy is one nn.Linear: under bf16 autocast its first loss moves off the float32 one by
    bfloat16 rounding (torch's own autocast on the CPU shows by how much); a bf16 target whose
    loss equals its fp32 loss computed the layer in float32."""
    def first_loss(target_name: str) -> float:
        return losses(target_name, "toy_workload:with_adamw", steps=1)[0]

    cpu_gap = abs(first_loss("cpu:eager:bf16") - first_loss("cpu:eager:fp32"))
    jax_gap = abs(first_loss("jax:jit:bf16") - first_loss("jax:jit:fp32"))
    assert cpu_gap > 1e-5
    assert jax_gap > cpu_gap / 10, (jax_gap, cpu_gap)


class PoolingCNN(torch.nn.Module):
    """A small CNN as a user writes one: conv, BatchNorm, ReLU and F.max_pool2d twice, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.norm1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8)
        self.conv2, self.norm2 = torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.head = torch.nn.Linear(16 * 4 * 4, 5)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.norm1(self.conv1(images))), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.norm2(self.conv2(x))), 2)
        return self.head(x.flatten(1))


def test_a_user_cnn_with_max_pooling_and_batch_norm_trains_as_eager_pytorch() -> None:
    """F.max_pool2d has a derivative on the jax family, and BatchNorm's running statistics come out of
    the step as PyTorch writes them: the losses and the statistics after the steps are eager's."""
    import functools

    import trainspeed

    workload = trainspeed.workload_from(
        model=PoolingCNN, loss=lambda outputs, batch: torch.nn.functional.cross_entropy(outputs, batch[1]),
        optimizer=functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9),
        batch=(torch.rand(BATCH, 3, 16, 16), torch.randint(0, 5, (BATCH,))), name="pooling_cnn")
    assert_same_losses(workload)
    statistics = {}
    for target_name in ("cpu:eager:fp32", "jax:jit:fp32"):
        target = get_target(target_name)
        trainable = target.build(workload, workload.default_size, 0)
        batch = target.move_batch(workload.synthetic_batch(workload.default_size, BATCH, torch.Generator().manual_seed(0)))
        for _ in range(3):
            target.run_step(trainable, batch)
        target.sync()
        state = trainable.state_dict()
        networks = state["networks"] if "networks" in state else {name: net.state_dict()
                                                                   for name, net in trainable.networks.items()}
        statistics[target_name] = {key: value for net in networks.values() for key, value in net.items() if "running" in key}
    eager, traced = statistics["cpu:eager:fp32"], statistics["jax:jit:fp32"]
    assert eager.keys() == traced.keys() and len(eager) == 4
    for key in eager:
        assert torch.allclose(traced[key].float(), eager[key].float(), rtol=1e-4, atol=1e-6), key
        assert not torch.allclose(eager[key], torch.zeros_like(eager[key])) or "mean" not in key
