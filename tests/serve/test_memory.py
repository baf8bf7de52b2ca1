"""What client tensors may occupy on a server: a state no larger than the session's model can have,
and all sessions' batches and states within the server's budget; a client beyond either is told
which limit, before its bytes are taken, and the server serves on."""

from __future__ import annotations

import pytest
import torch

from trainspeed.serve.memory import StateLimit, model_bytes
from trainspeed.targets import get_target
from trainspeed.wire.client import RemoteError
from trainspeed.wire.state import nested_tensors
from trainspeed.workloads import get_workload
from trainspeed.workloads.base import setup_optimizers

from serve_runs import WORKLOAD, batches, local_losses, remote_losses, wait_until

SAMPLE_BYTES = sum(tensor.element_size() * tensor[0].numel()
                   for tensor in WORKLOAD.synthetic_batch("tiny", 1, torch.Generator()).values())
"""Bytes of one Mahjong sample on the wire (its batch tensors' bytes per sample: 5,938 for 86 float16 planes)."""


def _tiny_model_bytes() -> int:
    trainable = WORKLOAD.build("tiny", seed=0)
    setup_optimizers(trainable, fused=False)
    return model_bytes(trainable)


def test_sessions_share_the_servers_budget_and_get_it_back_when_they_end(serve):
    model = _tiny_model_bytes()
    budget_bytes = 2 * model + (1 << 20)  # two models, and 1 MiB for their batches
    server = serve(memory_budget_gib=budget_bytes / 2**30)
    assert get_target(server.remote_name).info.memory_budget_bytes == budget_bytes
    held_batch = batches(1, batch_size=120)[0]  # 713 KB: one fits beside the two models, two do not
    assert 2**20 / 2 < 120 * SAMPLE_BYTES < 2**20

    first_target, second_target = get_target(server.remote_name), get_target(server.remote_name)
    first = first_target.build(WORKLOAD, "tiny", 0)
    first_batch = first_target.move_batch(held_batch)
    first_target.run_step(first, first_batch)
    assert server.host.memory.held_bytes == model + 120 * SAMPLE_BYTES

    second = second_target.build(WORKLOAD, "tiny", 0)
    assert server.host.memory.held_bytes == 2 * model + 120 * SAMPLE_BYTES
    with pytest.raises(RemoteError, match=r"RESOURCE_EXHAUSTED: batch \d+ tensor '\w+' \(.* MiB\) does not fit the "
                                          r"server's memory budget for client tensors and models \(.* MiB, its "
                                          r"--memory-budget-gib\)"):
        second_target.run_step(second, second_target.move_batch(held_batch))

    del first, first_batch, second
    assert wait_until(lambda: server.host.live_sessions == 0 and server.host.memory.held_bytes == 0)
    host_batches = batches(2, batch_size=120)
    assert remote_losses(server.remote_name, host_batches) == local_losses(host_batches)


@pytest.mark.parametrize("name, size", [("mahjong", "tiny"), pytest.param("stylegan3", "tiny-t", marks=pytest.mark.slow)])
def test_a_trained_models_state_fits_the_limit_its_fresh_model_sets(name, size):
    """The limit must let every real resume through: a state after training steps (the optimizers'
    moments filled in) is within the limit the freshly built model gives its session."""
    workload = get_workload(name)
    target = get_target("cpu:eager:fp32")
    trainable = target.build(workload, size, 0)
    limit = StateLimit.of(trainable)
    batch = target.move_batch(workload.synthetic_batch(size, 2, torch.Generator().manual_seed(0)))
    for _ in range(2):
        target.run_step(trainable, batch)
    trained = list(nested_tensors(trainable.state_dict()))
    assert sum(t.numel() * t.element_size() for t in trained) <= limit.nbytes
    assert len(trained) <= limit.tensors


def test_a_model_that_does_not_fit_the_budget_is_refused_when_built_and_the_server_serves_on(serve):
    """A client could once build models (850 MB each at `large`) outside the budget, which counted
    only the tensors it sent: the model and its optimizer state count from the moment it is built."""
    model = _tiny_model_bytes()
    server = serve(memory_budget_gib=1.5 * model / 2**30)  # one model fits, two do not
    first_target, second_target = get_target(server.remote_name), get_target(server.remote_name)
    first = first_target.build(WORKLOAD, "tiny", 0)
    with pytest.raises(RemoteError, match=r"RESOURCE_EXHAUSTED: the mahjong tiny model with its optimizer state "
                                          r"\(.* MiB\) does not fit the server's memory budget"):
        second_target.build(WORKLOAD, "tiny", 0)
    host_batches = batches(1, batch_size=4)
    assert [float(first_target.run_step(first, first_target.move_batch(b))) for b in host_batches] == \
        local_losses(host_batches)
    del first
    assert wait_until(lambda: server.host.live_sessions == 0 and server.host.memory.held_bytes == 0)
