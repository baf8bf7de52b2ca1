"""FLOPs counted from several threads at once leave the process as they found it: the attention
backends every later step computes with, and torch.compile compiling (torch keeps "a dispatch mode
is on" in flags of the whole process, which threads in modes at once can leave set for good)."""

import threading

import torch
from torch.utils import _python_dispatch

from trainspeed.workloads import get_workload
from trainspeed.workloads.flops import count_flops_per_sample


def _backend_flags() -> tuple[bool, ...]:
    backends = torch.backends.cuda
    return (backends.flash_sdp_enabled(), backends.mem_efficient_sdp_enabled(), backends.math_sdp_enabled(),
            backends.cudnn_sdp_enabled())


def _count_in_threads(threads: int, counts_each: int) -> list[float]:
    mahjong = get_workload("mahjong")
    start = threading.Barrier(threads)
    counts: list[float] = []

    def count() -> None:
        start.wait()
        for _ in range(counts_each):
            counts.append(count_flops_per_sample(mahjong, "tiny")[0])

    workers = [threading.Thread(target=count) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return counts


def test_flop_counts_in_four_threads_at_once_leave_attention_and_compilation_as_they_were():
    before = _backend_flags()
    counts = _count_in_threads(4, 3)
    assert len(counts) == 12 and len(set(counts)) == 1 and counts[0] > 0
    assert _backend_flags() == before
    assert not _python_dispatch.is_in_torch_dispatch_mode()

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    compiled_before = counters["frames"]["ok"]
    torch.compile(lambda x: (x * 2).sum(), backend="eager")(torch.ones(3))
    # At least one frame: what an earlier test of the same worker left (a guard on global state)
    # can make dynamo convert the frame twice; a dispatch mode left on would convert none.
    assert counters["frames"]["ok"] >= compiled_before + 1
