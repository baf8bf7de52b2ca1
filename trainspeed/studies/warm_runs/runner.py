"""A study's runs trained in a few warm processes, not one process each.

Each of up to `--parallel-runs` workers (`worker.py`) is started once, when a run first needs it,
and then trains run after run, handed their settings as JSON over a pipe. The imports and the
workload module are paid for once per worker instead of once per run, which on a small workload was
most of a run's cost. Each run is still a `trainspeed train` with its own run directory, checks,
lock and `--resume`, so what it writes, and a rerun's skipping of what is finished, are as they
were. A study whose rows count a run's start-up (the time-to-target study's `command_s`) starts
each run as a command of its own instead.

A run that fails stops the study once the runs under way end (no new one starts); the error names
the run's command, as a failed command's did.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from trainspeed.safe_path import isolated_environment
from trainspeed.studies.common import StudyFailed, child_environment, shown
from trainspeed.studies.warm_runs.worker import WORKER_MODULE, Reply, read_reply, request_line
from trainspeed.train.config import TrainConfig
from trainspeed.train.flags import train_command

WARM_RUN_START_S = 1.0
"""Seconds a run takes to start in a warm process (its checks, model, loaders, checkpoint), which a
study's estimate adds per run beside one command start per worker."""
LOG_LINES_SHOWN = 3
"""Lines of a worker's output a failure shows where the worker itself died."""


@dataclass(frozen=True)
class TrainJob:
    """One run to train: its name (for the progress line) and its `trainspeed train` settings."""

    name: str
    config: TrainConfig

    @property
    def command(self) -> str:
        return shown(*train_command(self.config))


class WarmWorker:
    """One warm process and the pipe to it; what it prints is kept in a temporary file."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.process = subprocess.Popen([sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True, encoding="utf-8",
                                        env=isolated_environment(child_environment()))

    def train(self, job: TrainJob) -> Reply:
        """Hand over one run and wait for its reply; a worker that died says so as exit 1 with its
        last lines."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(request_line(job.config.to_json()) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
            if line:
                return read_reply(line)
        except (BrokenPipeError, ValueError):
            pass
        code = self.process.wait()
        return Reply(exit=code or 1, error=f"its process ended (exit {code}): {self.last_lines()}",
                     pid=self.process.pid)

    def last_lines(self) -> str:
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").strip().splitlines()[-LOG_LINES_SHOWN:]
        return " / ".join(lines) or "it printed nothing"

    def close(self) -> None:
        """End of input: the worker ends after the run it trains, if any."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        self.process.wait()
        self.log.close()


@dataclass
class WarmRunner:
    """Trains jobs on up to `workers` warm processes; `processes` counts those it started."""

    workers: int
    processes: int = 0
    failures: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, jobs: Iterable[TrainJob], released: Callable[[TrainJob], Iterable[TrainJob]] = lambda job: ()
            ) -> None:
        """Every job, in order, and every job `released` returns once a job trained (the next
        factor of a critical-batch point, once the one below it matched; it is also how the caller
        hears of each finished job); StudyFailed with the first failure once the jobs under way ended."""
        self._pending = collections.deque(jobs)
        self._in_flight = 0
        self._released = released
        self._changed = threading.Condition(self._lock)
        threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(self.workers)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:
            self._stop.set()  # a Ctrl-C reached the workers too: each checkpoints its run and stops
            for thread in threads:
                thread.join()
            raise
        if self.failures:
            raise StudyFailed(self.failures[0])

    def _next(self) -> TrainJob | None:
        """The next job to train; None once none is left and none under way can release more (or
        something failed). Waits while only jobs under way could release one."""
        with self._changed:
            while not self._pending and self._in_flight and not self._stop.is_set():
                self._changed.wait(timeout=1.0)  # a Ctrl-C sets _stop without notifying
            if self._stop.is_set() or not self._pending:
                return None
            self._in_flight += 1
            return self._pending.popleft()

    def _finished(self, job: TrainJob, trained: bool) -> None:
        """A job ended: the jobs it releases (where it trained) join the queue. A release that
        fails (the run's folder unreadable) stops the study as a failed run does."""
        more: list[TrainJob] = []
        try:
            more = list(self._released(job)) if trained else []
        except Exception as error:  # noqa: BLE001 - reported as the study's failure, in one line
            self._fail(f"after `{job.command}`: {type(error).__name__}: {error}")
        with self._changed:
            self._in_flight -= 1
            self._pending.extend(more)
            self._changed.notify_all()

    def _serve(self) -> None:
        """One worker's share: the next job while there is one and nothing failed; the worker is
        started here, at its first job, and ended here (it dies with the thread that started it)."""
        worker: WarmWorker | None = None
        try:
            while (job := self._next()) is not None:
                trained = False
                try:
                    if worker is None:
                        worker = self._started()
                    trained = self._train(job, worker)
                finally:
                    self._finished(job, trained)
                if not trained:
                    return
        finally:
            if worker is not None:
                worker.close()

    def _started(self) -> WarmWorker:
        worker = WarmWorker()
        with self._lock:
            self.processes += 1
        return worker

    def _train(self, job: TrainJob, worker: WarmWorker) -> bool:
        """One job on `worker`; False (and the study stops) where it failed."""
        print(job.command, flush=True)
        started = time.monotonic()
        reply = worker.train(job)
        if reply.exit != 0:
            self._fail(f"`{job.command}` failed (exit {reply.exit} after {time.monotonic() - started:.0f} s): "
                       f"{reply.error}")
            return False
        return True

    def _fail(self, message: str) -> None:
        with self._lock:
            self.failures.append(message)
            self._stop.set()
