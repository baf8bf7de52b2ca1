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


ON_THE_TOY = {"xla:lazy:fp32": "toy_workload:with_adamw", "cpu:compile:fp32": "toy_workload:with_adamw"}
"""Targets whose step is proven on the toy with AdamW (a real network, loss and optimizer with state)
instead of Mahjong's network, whose graphs take tens of CPU-seconds to compile cold (XLA: about 5 per
graph; inductor: 30-60 s): the bf16 target of each compiles Mahjong's step (the same ops, under
autocast), and the fp32 target adds no path of its own to that network."""


STEPS = 5
"""Steps on the fixed batch: enough for the loss to fall past the margin on every target (on the
toy, the slowest to fall, it has fallen by 0.10 at the fifth step; Mahjong by 0.36), while a
step that never updates the parameters returns the first loss again."""


@pytest.mark.e2e
@pytest.mark.parametrize("name", _with_slow_marks(all_target_names()))
def test_loss_falls_on_a_fixed_batch(name):
    if AVAILABLE[name] is not None:
        pytest.skip(AVAILABLE[name])
    workload = get_workload(ON_THE_TOY.get(name, "mahjong"))
    target = get_target(name)
    target.reset_compilation()
    trainable = target.prepare(workload.build("tiny", seed=0))
    batch = target.move_batch(workload.synthetic_batch("tiny", 32, torch.Generator().manual_seed(0)))
    losses = [float(target.run_step(trainable, batch)) for _ in range(STEPS)]
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


def test_options_follow_the_precision_and_are_part_of_the_name():
    from trainspeed.targets.base import TargetSpec

    spec = TargetSpec.parse("cuda:eager:bf16:cudnn-benchmark")
    assert (spec.device, spec.mode, spec.precision, spec.options) == ("cuda", "eager", "bf16", ("cudnn-benchmark",))
    assert str(spec) == "cuda:eager:bf16:cudnn-benchmark"
    assert str(TargetSpec.parse("cpu:eager:fp32")) == "cpu:eager:fp32"
    assert TargetSpec.parse("x:m:p:a+b").options == ("a", "b")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("cuda:eager:bf16:", "device:mode:precision"),
        ("cuda:eager:bf16:a++b", "device:mode:precision"),
        ("cuda:eager:bf16:a:b", "device:mode:precision"),
        ("cuda:eager:bf16:cudnn-benchmark+cudnn-benchmark", "named twice"),
    ],
)
def test_bad_option_spellings_say_what_is_wrong(text, fragment):
    from trainspeed.targets.base import TargetSpec

    with pytest.raises(UsageError, match=fragment):
        TargetSpec.parse(text)


def test_a_family_refuses_options_it_does_not_have():
    from trainspeed.targets.base import TargetSpec
    from trainspeed.targets.cpu import CpuTarget
    from trainspeed.targets.cuda import CudaTarget

    with pytest.raises(UsageError, match="option 'cudnn-benchmark' is not available on cpu; it has none"):
        CpuTarget.check_spec(TargetSpec.parse("cpu:eager:fp32:cudnn-benchmark"))
    with pytest.raises(UsageError, match="option 'fast' is not available on cuda; choose from cudnn-benchmark"):
        CudaTarget.check_spec(TargetSpec.parse("cuda:eager:bf16:fast"))
    CudaTarget.check_spec(TargetSpec.parse("cuda:max-autotune:bf16:cudnn-benchmark"))


def test_cuda_switches_are_set_without_a_device(monkeypatch):
    """The CUDA family's cuDNN switch and compile modes, checked on a host without a GPU: building
    the target object and configuring it touch no device."""
    from trainspeed.targets import dynamo
    from trainspeed.targets.base import TargetSpec
    from trainspeed.targets.cuda import CudaTarget

    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    try:
        CudaTarget(TargetSpec.parse("cuda:eager:bf16:cudnn-benchmark")).configure_precision()
        assert torch.backends.cudnn.benchmark is True
        CudaTarget(TargetSpec.parse("cuda:eager:bf16")).configure_precision()
        assert torch.backends.cudnn.benchmark is False
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved

    modes = []
    monkeypatch.setattr(dynamo, "compile_network", lambda network, mode=None: modes.append(mode) or network)
    network = torch.nn.Linear(2, 2)
    for mode in ("eager", "compile", "cudagraphs", "max-autotune"):
        assert CudaTarget(TargetSpec.parse(f"cuda:{mode}:bf16")).wrap_network(network) is network
    assert modes == [None, "reduce-overhead", "max-autotune"]
