"""How this process starts Python children of its own (a loader's workers, a pool's): forked while
JAX has not started here, else from a fork server.

JAX's runtime runs threads once it has started (its backends are up); a process forked then holds
copies of their locks in whatever state they were, and can deadlock (JAX warns at every fork from
then on). A fork before that, or a child that never ran JAX, is safe. Where it is safe a fork is
kept: it starts a child in milliseconds and hands it the parent's memory as is. Otherwise the
children come from a fork server, a fresh Python process that never ran JAX and forks them (it
starts once per process, importing `preload`); only where the platform has none, from spawn. Such
a child receives its work pickled, as spawn's children do, and imports nothing from the working
folder (`trainspeed.safe_path`).

A fork of a process that may have started JAX goes through here; a child started by exec
(`subprocess` without `preexec_fn`) runs no Python before it, and needs nothing of this.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from multiprocessing.context import BaseContext

from trainspeed.safe_path import children_isolated


def jax_started() -> bool:
    """Whether JAX's runtime has started in this process: its backends (and their threads) are up.
    Never imports JAX. A JAX without the probe counts as started once imported."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return True


def child_context(preload: Sequence[str] = ()) -> BaseContext:
    """The start method for a child started now: fork where the platform has it and JAX has not
    started in this process, else a fork server importing `preload` (modules the children need,
    so each does not import them anew; the first caller's list is the server's), else spawn."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and not jax_started():
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(preload))
        return context
    return multiprocessing.get_context("spawn")


@contextlib.contextmanager
def starting(context: BaseContext) -> Iterator[None]:
    """While children of `context` start (and the processes multiprocessing starts for them: the
    fork server, the resource tracker): a fresh process imports nothing from the working folder."""
    if context.get_start_method() == "fork":
        yield
        return
    with children_isolated():
        yield
