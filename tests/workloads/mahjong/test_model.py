"""The policy network: size, masking, and FLOPs per sample against PyTorch's flop counter."""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from trainspeed.workloads import get_workload
from trainspeed.workloads.mahjong.model import ILLEGAL_LOGIT, SIZES, MahjongPolicy


def test_base_is_about_25m_parameters():
    count = sum(p.numel() for p in MahjongPolicy(SIZES["base"]).parameters())
    assert 24e6 < count < 26e6


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_analytic_flops_match_the_flop_counter(size):
    workload = get_workload("mahjong")
    trainable = workload.build(size)
    batch = workload.synthetic_batch(size, 4, torch.Generator().manual_seed(0))
    policy = trainable.networks["policy"]
    # The math backend decomposes attention into matmuls the counter sees on CPU.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = policy(batch["features"], batch["mask"], batch["action"])
        loss.backward()
    assert counter.get_total_flops() / 4 == pytest.approx(workload.flops_per_sample(size), rel=1e-6)


def test_illegal_actions_get_no_probability():
    workload = get_workload("mahjong")
    batch = workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(1))
    logits, _ = workload.build("tiny").networks["policy"](batch["features"], batch["mask"])
    assert torch.all(logits[~batch["mask"]] == ILLEGAL_LOGIT)
    assert torch.all(logits.softmax(dim=1)[~batch["mask"]] == 0)
    assert batch["mask"][torch.arange(8), batch["action"]].all()


def test_float16_features_give_the_same_logits_as_float32():
    workload = get_workload("mahjong")
    batch = workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(2))
    policy = workload.build("tiny").networks["policy"]
    logits32, _ = policy(batch["features"], batch["mask"])
    logits16, _ = policy(batch["features"].half(), batch["mask"])
    torch.testing.assert_close(logits16, logits32)
