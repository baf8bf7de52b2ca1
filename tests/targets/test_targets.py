"""Every target usable here runs the real training step, and the loss falls on a fixed batch."""

import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.targets import all_target_names, available_targets, get_target
from trainspeed.workloads import get_workload

AVAILABLE = available_targets()


def _with_slow_marks(names: list[str]) -> list:
    """Compiling modes and XLA take seconds per target; eager steps take milliseconds."""
    return [pytest.param(name, marks=pytest.mark.slow) if ":eager:" not in name else name for name in names]


@pytest.mark.parametrize("name", _with_slow_marks(all_target_names()))
def test_loss_falls_on_a_fixed_batch(name):
    if AVAILABLE[name] is not None:
        pytest.skip(AVAILABLE[name])
    workload = get_workload("mahjong")
    target = get_target(name)
    target.reset_compilation()
    trainable = target.prepare(workload.build("tiny", seed=0))
    batch = target.move_batch(workload.synthetic_batch("tiny", 32, torch.Generator().manual_seed(0)))
    losses = [float(target.run_step(trainable, batch)) for _ in range(8)]
    target.sync()
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0] - 0.05, losses


def test_xla_counts_compilations():
    if AVAILABLE["xla:lazy:fp32"] is not None:
        pytest.skip(AVAILABLE["xla:lazy:fp32"])
    target = get_target("xla:lazy:fp32")
    before = target.compile_count()
    x = torch.randn(3, 5).to(target.device)
    result = (x @ x.T + 17.0).sum()
    target.after_step()
    target.sync()
    assert target.compile_count() > before
    assert result.cpu().item() == pytest.approx(float((x.cpu() @ x.cpu().T + 17.0).sum()), rel=1e-5)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("cpu:eager", "device:mode:precision"),
        ("tpu:eager:fp32", "unknown device 'tpu'"),
        ("cpu:lazy:fp32", "mode 'lazy' is not available on cpu"),
        ("cpu:eager:fp8", "precision 'fp8'"),
    ],
)
def test_bad_target_strings_say_what_is_wrong(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        get_target(text)


def test_cpu_oom_signature_is_recognised():
    target = get_target("cpu:eager:fp32")
    with pytest.raises(RuntimeError) as caught:
        torch.empty(2**50, dtype=torch.uint8)
    assert target.is_oom(caught.value)
    assert not target.is_oom(RuntimeError("shape mismatch"))
