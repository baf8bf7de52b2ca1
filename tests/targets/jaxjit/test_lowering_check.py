"""`trainspeed check --target jax:jit:* --platform tpu`: the step lowered for a TPU on this CPU
machine. Every op torchax cannot lower is named with the workload's line that called it (the trace
goes on past each, so one check names them all), a host read that stops the trace is named with
its line, a step whose Python state changes per step compiles again, and a clean step is ported."""

from __future__ import annotations

import json

import pytest
import torch
from toy_workload import ToyWorkload
from torch import nn

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget
from trainspeed.targets.jaxjit.lowering import check_lowering
from trainspeed.workloads.base import Batch, Trainable

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

BESSEL_LINE = "curve = torch.special.spherical_bessel_j0(hidden) + torch.special.airy_ai(hidden)"


class SpecialFunctions(Trainable):
    """A step through two special functions torchax 0.0.13 has no lowering for."""

    def __init__(self) -> None:
        super().__init__({"net": nn.Linear(4, 4)})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.AdamW(self.networks["net"].parameters(), lr=1e-3)}

    def train_step(self, batch: Batch) -> torch.Tensor:
        hidden = self.wrapped["net"](batch["x"])
        curve = torch.special.spherical_bessel_j0(hidden) + torch.special.airy_ai(hidden)
        loss = (curve + hidden).pow(2).mean()
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad(set_to_none=True)
        return loss.detach()


class SpecialWorkload:
    name = "special-functions"
    sizes = ("tiny",)

    def build(self, size: str, seed: int = 0) -> SpecialFunctions:
        torch.manual_seed(seed)
        return SpecialFunctions()

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        return {"x": torch.randn(batch_size, 4, generator=generator)}

    def flops_per_sample(self, size: str) -> float:
        return 6.0 * 16


def test_every_op_without_a_lowering_is_named_with_its_line() -> None:
    findings = check_lowering(SpecialWorkload(), "tiny", "fp32", "tpu", batch_size=8, seed=0)
    assert set(findings.missing_ops) == {"aten::special_spherical_bessel_j0", "aten::special_airy_ai"}
    for callers in findings.missing_ops.values():
        (caller,) = callers
        assert "test_lowering_check.py:" in caller and caller.endswith(BESSEL_LINE), caller
    assert findings.untraceable is None and findings.programs_per_step == 1


def test_a_ported_step_is_ported_through_the_command(capsys, tmp_path) -> None:
    out = tmp_path / "check.json"
    code = main(["check", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:bf16", "--platform", "tpu",
                 "--batch-size", "8", "--out", str(out), "--strict"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "lowered for tpu" in printed and "\nverdict: ported: " in printed, printed
    written = json.loads(out.read_text())
    assert written["lowered_for"] == "tpu" and written["ported"] is True and written["fallback_ops"] == []


@pytest.mark.parametrize("factory, finding", [
    ("loss_reading", "reads a tensor's value on the host"),
    ("shrinking", "programs compiled again per step: 1"),
])
def test_a_host_read_and_a_step_that_compiles_again_are_findings(capsys, factory, finding) -> None:
    code = main(["check", "--workload", f"toy_workload:{factory}", "--target", "jax:jit:fp32", "--platform", "tpu",
                 "--strict"])
    printed = capsys.readouterr().out
    assert code == 1 and finding in printed, printed
    assert printed.strip().splitlines()[-1].startswith("verdict: not ported"), printed


def test_platform_is_refused_for_a_target_that_runs_its_steps_here(cli_error) -> None:
    said = cli_error("check", "--target", "xla:lazy:fp32", "--platform", "tpu")
    assert "--platform lowers a jax:* target's step" in said


def test_an_unknown_platform_is_refused(cli_error) -> None:
    assert "--platform quantum: choose one of tpu, cpu, cuda, rocm" in cli_error(
        "check", "--workload", "mahjong", "--target", "jax:jit:fp32", "--platform", "quantum")


def test_the_toy_workload_is_ported() -> None:
    """The toy's plain step (one Linear, SGD) lowers whole: no finding at all."""
    findings = check_lowering(ToyWorkload("plain"), "tiny", "fp32", "tpu", batch_size=8, seed=0)
    assert not findings.missing_ops and findings.untraceable is None and findings.programs_per_step == 1
