"""Test-session setup shared by every test folder."""

from __future__ import annotations

import importlib.util
import io
import os
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generator, Iterator

os.environ.setdefault("PJRT_DEVICE", "CPU")
# XLA's CPU code generation unoptimized (-O0), for the test run and every process it starts: the
# tests check what an XLA step computes, when it compiles and where it syncs, never how fast the
# generated code runs, and -O0 halves the compilations' cost.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# JAX's persistent compilation cache for the test run and every process it starts, as torch's
# inductor keeps its own under the temporary folder: on a warm machine each JAX program of the
# suite compiles once (the jax and exported tests took 229 CPU s warm against 315 cold). A cold
# measurement points it at an empty folder (JAX_COMPILATION_CACHE_DIR). torch_xla's cache stays
# off: tests count its compilations, which a cache hit would skip.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      str(Path(tempfile.gettempdir()) / f"trainspeed_tests_jax_cache_uid{os.getuid()}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")  # JAX's default, 1 s, leaves most out
# Inductor takes the vector instruction sets the CPU lists as usable, for the test run and every
# process it starts: by default a process whose compiled code picks one first loads a probe built
# for each set in a fresh Python that imports torch (about 2 CPU seconds each, three on an AVX-512
# machine; test_api.py's test of the example took 38 CPU s against 44). The tests check what
# compiled code computes, never that probe; AMX keeps its own probe either way.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if importlib.util.find_spec("torch_xla") is not None:
    # Register the XLA device before any test runs a backward pass: autograd sizes its
    # per-device queues at the first backward, and an XLA device added later trips an assert.
    import torch_xla

    torch_xla.device()

torch.set_num_threads(int(os.environ.get("TRAINSPEED_TEST_THREADS", "2")))

import child_commands  # noqa: E402 - tests/child_commands.py, the one runner of child processes
from shared_builds import built_once  # noqa: E402

if TYPE_CHECKING:
    from trainspeed.serve.server import RunningServer

_running: list[pytest.Item] = []
"""The test being set up, run or torn down (the runner checks that it is marked `e2e`)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running[:] = [item]


def _check_marked_e2e() -> None:
    """A test that starts a child process (itself, or through a fixture it needs) is end-to-end."""
    if _running and _running[0].get_closest_marker("e2e") is None:
        raise AssertionError(f"{_running[0].nodeid} runs trainspeed in a child process: mark it "
                             "@pytest.mark.e2e (or its module: pytestmark = pytest.mark.e2e)")


child_commands.check_marked = _check_marked_e2e


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked `long` (minutes of work in all) run first, each keeping its own order: with
    the suite spread over workers a file at a time (`make test`: pytest-xdist, `--dist loadfile`),
    the long modules start at once and the short ones fill the gaps, so the workers finish together."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # a stable sort keeps the order


@pytest.fixture
def untrusted_folder(tmp_path: Path) -> Path:
    """A working folder as one received from someone may be: modules named as the ones trainspeed's
    processes import, which must never run (`child_commands.write_untrusted_modules`)."""
    return child_commands.write_untrusted_modules(tmp_path / "untrusted")


@pytest.fixture(scope="session")
def selfplay_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """22 self-play games of four rule-based agents (seed 0), as `trainspeed data mahjong-selfplay`
    writes them; game 20 is the first of the validation split. Tests read it; one that changes a
    dataset copies it first."""
    def build(folder: Path) -> None:
        child_commands.run_ok("data", "mahjong-selfplay", "--games", "22", "--workers", "1", "--out", str(folder / "data"),
                              "--seed", "0", "--no-progress", timeout=300)

    return built_once(tmp_path_factory, "selfplay", build) / "data"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, selfplay_data: Path) -> Path:
    """A run directory of `trainspeed train`: Mahjong tiny, one rank, 6 steps of batch 32 on
    `selfplay_data`, a train row every 2 steps, a validation every 3, every step's checkpoint kept.
    Tests read it; one that changes a run copies it first."""
    def build(folder: Path) -> None:
        child_commands.run_ok("train", "--workload", "mahjong", "--size", "tiny", "--data", str(selfplay_data), "--steps",
                              "6", "--batch-size-per-device", "32", "--eval-every", "3", "--eval-batches", "2",
                              "--log-every", "2", "--checkpoint-every", "1", "--keep-checkpoints", "0", "--threads", "1",
                              "--no-progress", "--out", str(folder / "tiny"), timeout=300)

    return built_once(tmp_path_factory, "tiny_run", build) / "tiny"


SERVER_LINES = pytest.StashKey[list[io.StringIO]]()
"""The lines of the test's servers in this process (`serve`), which its failure report shows."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for number, lines in enumerate(item.stash.get(SERVER_LINES, []), 1):
            report.sections.append((f"trainspeed serve {number} in this process", lines.getvalue()))
    return report


@pytest.fixture
def serve(request: pytest.FixtureRequest) -> Iterator[Callable[..., RunningServer]]:
    """A function starting a server in this process (port 0, the given ServeConfig settings): fast,
    and its losses are bit-comparable with a local run's (same threads). All are stopped at the end.
    Its lines go to a buffer that a failed test's report shows, never to this process's stderr: its
    sessions end in threads of their own, maybe while pytest captures nothing (between a test's
    phases), and the line would land in the middle of pytest's output."""
    from trainspeed.serve.config import ServeConfig
    from trainspeed.serve.server import start_server

    started: list[RunningServer] = []

    def start(**settings) -> RunningServer:
        lines = io.StringIO()
        running = start_server(ServeConfig(**{"listen": "127.0.0.1:0", **settings}), log_to=lines)
        started.append(running)
        request.node.stash.setdefault(SERVER_LINES, []).append(lines)
        return running

    yield start
    for running in started:
        running.stop(None)


@pytest.fixture
def server(serve) -> RunningServer:
    """A server in this process with the default settings (`serve`)."""
    return serve()


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results.jsonl"


def _child_pids(parent: int | None = None) -> set[int]:
    parent = os.getpid() if parent is None else parent
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.add(int(stat.parent.name))
    return children


def _workers(parent: int | None = None) -> set[int]:
    """The processes working for the test process (or the given process): its children, and the
    children a fork server forked for it (`trainspeed.child_start`: once JAX has started in it);
    not the fork server itself, nor multiprocessing's resource tracker."""
    if parent is not None and parent != os.getpid():
        return _child_pids(parent)
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    server = multiprocessing.forkserver._forkserver._forkserver_pid
    tracker = multiprocessing.resource_tracker._resource_tracker._pid
    served = _child_pids(server) if server is not None else set()
    return (_child_pids() | served) - {server, tracker}


_FORKS: list[str] = []
"""The stack of each fork of the test process (a child not yet exec'd runs a copy of it)."""
os.register_at_fork(before=lambda: _FORKS.append("".join(traceback.format_stack(limit=12))))


@pytest.fixture
def start_jax() -> Callable[[], Callable[[], list[str]]]:
    """A function that starts JAX's runtime in the test process (as a caller's program may have,
    or a run's model does) and returns a function listing the forks of this process since, each as
    the stack that made it. None may happen (`trainspeed.child_start`): a fork of a process whose
    JAX threads run can deadlock the child."""
    jax = pytest.importorskip("jax")

    def start() -> Callable[[], list[str]]:
        jax.numpy.zeros(1).block_until_ready()
        since = len(_FORKS)
        return lambda: _FORKS[since:]

    return start


@pytest.fixture
def child_pids():
    """A function listing the processes working for the test process (e.g. loader workers: its
    children, or a fork server's children started for it), or the given process's children."""
    return _workers


@pytest.fixture
def cli_error(capsys):
    """A function running `trainspeed ARGV...` in-process that asserts the command failed as bad
    input must (exit code 2, exactly one stderr line `trainspeed: error: ...`) and returns the line."""
    from trainspeed.cli import main

    def run(*argv: str) -> str:
        code = main(list(argv))
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: "), (code, lines)
        return lines[0]

    return run
