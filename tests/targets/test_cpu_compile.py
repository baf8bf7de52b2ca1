"""Compiled CPU code runs with the thread count of the process that runs it."""

import torch
from torch import nn

from trainspeed.targets import get_target


def _compile_and_run(threads: int) -> tuple[int, int]:
    """Compile a small network through the cpu:compile target at `threads` torch threads; returns
    inductor's (cache hits, cache misses) for it."""
    from torch._dynamo.utils import counters

    torch.set_num_threads(threads)
    target = get_target("cpu:compile:fp32")
    target.reset_compilation()
    hits, misses = counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]
    torch.manual_seed(0)
    network = target.wrap_network(nn.Linear(64, 64))
    with torch.no_grad():
        network(torch.randn(512, 64)).relu().sum()
    return counters["inductor"]["fxgraph_cache_hit"] - hits, counters["inductor"]["fxgraph_cache_miss"] - misses


def test_kernels_generated_for_two_threads_are_not_loaded_by_a_one_thread_process():
    """Inductor writes the thread count into its C++ kernels (`omp parallel num_threads(2)`) but
    left it out of its cache key: a `--threads 1` run then loaded another run's 2-thread kernels,
    which on a machine with one free core made compiled steps 10x slower than eager."""
    from torch._inductor.utils import fresh_cache

    threads = torch.get_num_threads()
    try:
        with fresh_cache():
            assert _compile_and_run(2) == (0, 1)
            assert _compile_and_run(1) == (0, 1)  # its own kernels, not the 2-thread ones
            assert _compile_and_run(1) == (1, 0)  # and the cache still serves the same thread count
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
