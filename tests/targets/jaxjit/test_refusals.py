"""What the jax family cannot trace is refused in one line that says what and where: a value read
on the host, a second backward(), torch.autograd.grad (torchax has no autograd). The refusal is a
UsageError (`StepNotTraceable`), so every command reports it as bad input, and it names the line
of the workload's own code, which is what its author must change.

And a checkpoint of a jax trainable (its state converted to torch's state_dict layout) restores
the exact state: a fresh trainable that loads it takes the same next step.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional

from trainspeed.errors import UsageError
from trainspeed.targets import get_target
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.targets.jaxjit.functional import StepNotTraceable
from trainspeed.workloads.base import Batch, Trainable

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None,
                                reason=str(JaxTarget.unavailable_reason()))

FEATURES, CLASSES, BATCH = 6, 3, 16


@torch.library.custom_op("refusals_test::looped", mutates_args=())
def looped(x: torch.Tensor) -> torch.Tensor:
    """An op whose JAX lowering (below) is a while loop, which JAX cannot differentiate in reverse."""
    return x * 1.5**3


@looped.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def register_looped() -> None:
    import jax
    from torchax.ops import ops_registry

    def lowered(x):
        return jax.lax.while_loop(lambda carry: carry[0] < 3, lambda carry: (carry[0] + 1, carry[1] * 1.5), (0, x))[1]

    ops_registry.register_torch_dispatch_op(torch.ops.refusals_test.looped.default, lowered, is_jax_function=True)


class Classifier(Trainable):
    """One linear layer trained with AdamW (an optimizer with state); `habit` is what its step
    does that a traced program cannot."""

    def __init__(self, habit: str, seed: int) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            network = nn.Linear(FEATURES, CLASSES)
        super().__init__({"net": network})
        self.habit = habit

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.AdamW(self.networks["net"].parameters(), lr=0.01)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        loss = functional.cross_entropy(self.wrapped["net"](batch["x"]), batch["y"])
        if self.habit == "item" and loss.item() > 100:  # refused: item
            loss = loss * 0
        if self.habit == "twice":
            loss.backward(retain_graph=True)
            loss.backward()  # refused: twice
        elif self.habit == "grad":
            grads = torch.autograd.grad(loss, list(self.networks["net"].parameters()))  # refused: grad
            for parameter, grad in zip(self.networks["net"].parameters(), grads):
                parameter.grad = grad
        elif self.habit == "no-derivative":
            (loss * looped(self.wrapped["net"].bias).sum()).backward()  # refused: no-derivative
        elif self.habit != "no-backward":
            loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class ClassifierWorkload:
    """The workload protocol around `Classifier`: the label is the largest of the first CLASSES features."""

    sizes = ("tiny",)

    def __init__(self, habit: str = "plain") -> None:
        self.name, self.habit = f"classifier-{habit}", habit

    def build(self, size: str, seed: int = 0) -> Classifier:
        return Classifier(self.habit, seed)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        inputs = torch.randn(batch_size, FEATURES, generator=generator)
        return {"x": inputs, "y": inputs[:, :CLASSES].argmax(dim=1)}

    def flops_per_sample(self, size: str) -> float:
        return 4.0 * FEATURES * CLASSES


def line_of(marker: str) -> int:
    """The line of this module that carries `# refused: MARKER`."""
    lines = Path(__file__).read_text().splitlines()
    [number] = [index for index, line in enumerate(lines, 1) if line.rstrip().endswith(f"# refused: {marker}")]
    return number


def fixed_batch(target, seed: int = 0):
    return target.move_batch(ClassifierWorkload().synthetic_batch("tiny", BATCH, torch.Generator().manual_seed(seed)))


def refusal(habit: str) -> str:
    """The message of the refusal of the first step of a workload with `habit`."""
    register_looped()
    target = get_target("jax:jit:fp32")
    with pytest.raises(UsageError) as refused:
        trainable = target.build(ClassifierWorkload(habit), "tiny", 0)
        target.run_step(trainable, fixed_batch(target))
        target.sync()
    assert isinstance(refused.value, StepNotTraceable), type(refused.value)
    message = str(refused.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("habit, says", [
    ("item", "reads a tensor's value on the host"),
    ("twice", "backward() more than once"),
    ("grad", "torch.autograd.grad"),
    ("no-backward", "never calls backward()"),
    ("no-derivative", "refusals_test.looped.default has no derivative in its JAX lowering"),
])
def test_a_step_that_cannot_be_traced_is_refused_in_one_line_saying_why(habit: str, says: str) -> None:
    assert says in refusal(habit)



@pytest.mark.parametrize("habit", [
    "item",
    "twice",
    "grad",
    "no-derivative",
])
def test_the_refusal_names_the_workloads_own_line(habit: str) -> None:
    message = refusal(habit)
    assert re.search(rf"\btest_refusals\.py:{line_of(habit)} in train_step\b", message), message


def test_a_plain_step_of_the_same_workload_is_not_refused() -> None:
    """The refusals above are the habits', not the classifier's."""
    target = get_target("jax:jit:fp32")
    trainable = target.build(ClassifierWorkload(), "tiny", 0)
    batch = fixed_batch(target)
    first, last = [float(target.run_step(trainable, batch)) for _ in range(4)][::3]
    assert last < first


def test_a_checkpoint_restores_the_state_a_fresh_trainable_steps_on() -> None:
    """A jax trainable's state_dict, written and read as the trainer's checkpoints are
    (torch.save, torch.load with weights_only), loaded into a fresh trainable: both take the same
    next step. The learning rate is changed before the checkpoint, so it must travel too; and the
    fresh trainable's own next loss shows the load changed something."""
    target = get_target("jax:jit:fp32")
    batch = fixed_batch(target)
    trained = target.build(ClassifierWorkload(), "tiny", 0)
    for _ in range(3):
        target.run_step(trained, batch)
    trained.optimizers["net"].param_groups[0]["lr"] = 0.05
    buffer = io.BytesIO()
    torch.save(trained.state_dict(), buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer, map_location="cpu", weights_only=True)

    restored = target.build(ClassifierWorkload(), "tiny", 0)
    unrestored_next = float(target.run_step(target.build(ClassifierWorkload(), "tiny", 0), batch))
    restored.load_state_dict(checkpoint)
    assert restored.optimizers["net"].param_groups[0]["lr"] == 0.05
    steps = [(float(target.run_step(trained, batch)), float(target.run_step(restored, batch))) for _ in range(2)]
    target.sync()
    for own, loaded in steps:
        assert loaded == own
    assert abs(steps[0][1] - unrestored_next) > 1e-3, (steps, unrestored_next)
