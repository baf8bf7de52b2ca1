import math

import pytest
import torch

from trainspeed.train.config import LRConfig
from trainspeed.train.lr_schedule import build_schedulers, lr_multiplier, lr_scale_factor


@pytest.mark.parametrize(
    ("rule", "expected"), [("none", 1.0), ("linear", 16.0), ("sqrt", 4.0)]
)
def test_scale_factor_follows_the_rule_relative_to_the_reference_batch(rule: str, expected: float) -> None:
    assert lr_scale_factor(rule, global_batch=8192, reference_batch=512) == pytest.approx(expected)


def test_warmup_is_linear_then_cosine_decays_to_the_floor() -> None:
    total, warmup = 100, 10
    ramp = [lr_multiplier(step, total, warmup, 0.1) for step in range(warmup)]
    assert ramp == pytest.approx([(step + 1) / warmup for step in range(warmup)])
    assert lr_multiplier(warmup, total, warmup, 0.1) == pytest.approx(1.0)
    assert lr_multiplier(total - 1, total, warmup, 0.1) == pytest.approx(0.1)
    decay = [lr_multiplier(step, total, warmup, 0.1) for step in range(warmup, total)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    midpoint = warmup + (total - warmup - 1) / 2
    assert lr_multiplier(math.floor(midpoint), total, warmup, 0.0) == pytest.approx(0.5, abs=0.02)


def test_schedulers_drive_every_optimizer_from_its_own_base_lr() -> None:
    weights = [torch.nn.Parameter(torch.zeros(2)) for _ in range(2)]
    optimizers = {
        "g": torch.optim.AdamW([weights[0]], lr=2e-3),
        "d": torch.optim.AdamW([weights[1]], lr=1e-3),
    }
    config = LRConfig(base_lr=None, scaling="linear", reference_batch=256, warmup_steps=4, min_lr_ratio=0.0)
    schedulers = build_schedulers(optimizers, config, global_batch=1024, total_steps=20)
    seen = {"g": [], "d": []}
    for _ in range(6):
        for name, optimizer in optimizers.items():
            seen[name].append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedulers[name].step()
    assert seen["g"][:4] == pytest.approx([8e-3 * k / 4 for k in range(1, 5)])
    assert seen["d"][3] == pytest.approx(4e-3)
    assert seen["g"][5] < seen["g"][4] == pytest.approx(8e-3)


def test_an_explicit_base_lr_replaces_the_workload_default() -> None:
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    config = LRConfig(base_lr=0.01, scaling="sqrt", reference_batch=512, warmup_steps=0, min_lr_ratio=1.0)
    build_schedulers({"policy": optimizer}, config, global_batch=2048, total_steps=10)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.02)
