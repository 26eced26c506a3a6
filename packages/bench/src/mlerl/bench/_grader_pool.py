"""The warm grading pool: :class:`GraderPool` keeps up to ``size`` long-lived grading children
(:class:`mlerl.bench._grader_worker._Worker`, each a ``python -m mlerl.bench._subprocess
--serve`` under the same ``RLIMIT_AS`` cap as :func:`mlerl.bench._subprocess.grade_in_subprocess`)
and hands each grade to an idle one.

A child that times out, dies or writes garbage is killed and replaced; a child is recycled after
``max_requests``; a child exits by itself on EOF on stdin or when its parent is gone, and a pool
nobody closed kills its children when it is collected, so no grader outlives its caller.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

from mlerl.bench._grade import GradeReport, _report
from mlerl.bench._grader_worker import _Failed, _parse_reply, _request_line, _Timeout, _Worker
from mlerl.bench._subprocess import DEFAULT_MEMORY_BYTES
from mlerl.bench._task import TaskSpec


def _kill_all(workers: set[_Worker]) -> None:
    """Finalizer of a pool nobody closed: no child outlives it."""
    for worker in list(workers):
        worker.kill()


class GraderPool:
    """Warm grading children: ``grade(task, path)`` is thread-safe and never raises for a bad file.

    At most ``size`` children, spawned on demand; a call waits for an idle one. A child that
    times out (``timeout_s`` per reply, its start-up not counted: ``start_timeout_s``) is killed
    and the report says "grading timed out after N s"; one that dies or breaks the protocol
    gives "grading process failed (...)" with its last stderr line. Either way the next call
    gets a fresh child. A call whose *warm* child turns out dead or broken is retried once on a
    fresh child, so a child killed while idle costs no grade. A child is recycled after
    ``max_requests`` grades. ``close()`` (or
    leaving a ``with`` block) kills every child.
    """

    def __init__(
        self,
        size: int = 2,
        timeout_s: float = 120.0,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        max_requests: int = 500,
        start_timeout_s: float = 60.0,
    ) -> None:
        for name, value in (
            ("size", size),
            ("timeout_s", timeout_s),
            ("memory_bytes", memory_bytes),
            ("max_requests", max_requests),
            ("start_timeout_s", start_timeout_s),
        ):
            if not value > 0:
                raise ValueError(f"GraderPool: {name} must be > 0, got {value!r}")
        self.size, self.timeout_s, self.memory_bytes = size, timeout_s, memory_bytes
        self.max_requests, self.start_timeout_s = max_requests, start_timeout_s
        self._cond = threading.Condition()
        self._workers: set[_Worker] = set()
        self._idle: list[_Worker] = []
        self._starting = 0
        self._closed = False
        self._keep_warm = False
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)

    def warm(self) -> int:
        """Start children up to ``size`` now (call it when the run starts), so no grade pays the
        interpreter start and the pandas import; from then on a child that is retired, dies or
        times out is replaced at once rather than at the next grade. Returns how many started.
        Does not wait for them: a grade asked of a child still importing waits for its ready
        line."""
        with self._cond:
            if self._closed:
                raise RuntimeError("GraderPool is closed")
            self._keep_warm = True
            missing = max(self.size - len(self._workers) - self._starting, 0)
            self._starting += missing  # reserved; each _spawn releases its own reservation
        started = attempted = 0
        try:
            for _ in range(missing):
                attempted += 1
                worker = self._spawn()
                started += 1
                with self._cond:
                    if not self._closed:
                        self._idle.insert(0, worker)  # most recently used children are popped first
                        self._cond.notify()
                        continue
                    self._workers.discard(worker)
                worker.dispose(graceful=False)
                break
        except OSError:
            pass  # the next grade reports the failure to start
        finally:
            with self._cond:
                self._starting -= missing - attempted  # the unattempted reservations
                self._cond.notify_all()
        return started

    @property
    def pids(self) -> list[int]:
        """Process ids of the live children (for monitoring and tests)."""
        with self._cond:
            return sorted(w.pid for w in self._workers)

    def grade(self, task: TaskSpec, submission_path: str | os.PathLike[str]) -> GradeReport:
        """Like :func:`grade_submission`, in a warm child; an invalid report says why on failure."""
        path = Path(submission_path)
        for attempt in range(2):
            try:
                worker = self._acquire()
            except OSError as exc:
                return _report(
                    task,
                    path,
                    None,
                    path.is_file(),
                    f"grading process failed (cannot start: {exc})",
                )
            healthy, was_warm = False, worker.served > 0
            try:
                report, healthy = self._ask(worker, task, path)
            finally:
                self._release(worker, healthy)
            # a warm child found dead when asked (killed while idle, OOM-killed by the host)
            # must not cost this submission its grade: once, ask a fresh child
            if (
                healthy
                or not was_warm
                or attempt
                or not report.error.startswith("grading process failed")
            ):
                return report
        return report

    def close(self) -> None:
        """Kill every child; calls in flight return "grading process failed"; idempotent."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = self._workers.difference(idle)
            self._workers.difference_update(idle)
            self._cond.notify_all()
        for worker in busy:
            worker.kill()
        for worker in idle:
            worker.dispose(graceful=False)

    def __enter__(self) -> GraderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _acquire(self) -> _Worker:
        """An idle live child, or a new one when fewer than ``size`` exist; else wait."""
        dead: list[_Worker] = []
        worker: _Worker | None = None
        with self._cond:
            while worker is None:
                if self._closed:
                    raise RuntimeError("GraderPool is closed")
                worker = self._pop_idle(dead)
                if worker is None and len(self._workers) + self._starting < self.size:
                    self._starting += 1
                    break
                if worker is None:
                    self._cond.wait()
        for gone in dead:
            gone.dispose(graceful=False)
        return worker if worker is not None else self._spawn()

    def _pop_idle(self, dead: list[_Worker]) -> _Worker | None:
        """The most recently used live idle child (call with the lock held); dead ones go to
        ``dead``."""
        while self._idle:
            worker = self._idle.pop()
            if worker.alive():
                return worker
            self._workers.discard(worker)
            dead.append(worker)
        return None

    def _spawn(self) -> _Worker:
        """Start a child for a slot reserved in ``_starting``."""
        worker = None
        try:
            worker = _Worker(self.memory_bytes)
        finally:
            with self._cond:
                self._starting -= 1
                if worker is not None:
                    self._workers.add(worker)
                self._cond.notify()
        return worker

    def _ask(self, worker: _Worker, task: TaskSpec, path: Path) -> tuple[GradeReport, bool]:
        """(report, whether the child may serve again)."""
        try:
            if not worker.ready:
                worker.wait_ready(self.start_timeout_s)
            worker.send(_request_line(task, path))
            report, retiring = _parse_reply(worker.read_line(self.timeout_s), path)
        except _Timeout:
            worker.kill()
            return _report(
                task, path, None, path.is_file(), f"grading timed out after {self.timeout_s} s"
            ), False
        except _Failed as exc:
            worker.reap(
                grace_s=0.0 if exc.args[0] else 1.0
            )  # at EOF it is exiting: keep its exit code
            why = exc.args[0] or f"exit {worker.proc.returncode}"
            error = f"grading process failed ({why}): {worker.last_stderr()}"
            return _report(task, path, None, path.is_file(), error), False
        worker.served += 1
        return report, worker.served < self.max_requests and not retiring

    def _release(self, worker: _Worker, healthy: bool) -> None:
        with self._cond:
            keep = healthy and not self._closed and worker.alive()
            if keep:
                self._idle.append(worker)
            else:
                self._workers.discard(worker)
            self._cond.notify()
        if not keep:
            worker.dispose(graceful=healthy)
            if self._keep_warm and not self._closed:
                try:
                    self.warm()
                except RuntimeError:
                    pass  # closed meanwhile
