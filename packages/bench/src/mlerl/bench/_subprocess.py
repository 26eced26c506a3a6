"""Grading in a separate process with a wall-clock timeout and a memory cap.

The score is computed outside the sandbox *and* outside the caller's process (threat model
row 22): a grader that hangs or exhausts memory on a hostile file is killed, and the caller
gets an invalid report whose ``error`` says why. Two ways to do it:

- :func:`grade_in_subprocess`: one fresh ``python -m mlerl.bench._subprocess`` per submission,
  reading one JSON request on stdin and writing one JSON report (pays the interpreter start
  and the pandas import every time).
- :class:`GraderPool`: long-lived ``python -m mlerl.bench._subprocess --serve`` children under
  the same ``RLIMIT_AS`` cap, reading one JSON request per line on stdin and writing one JSON
  report per line on stdout. A child that times out, dies or writes garbage is killed and
  replaced; a child is recycled after ``max_requests``; a child exits by itself on EOF on
  stdin or when its parent is gone, so no grader outlives its caller.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import resource
import selectors
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any

from mlerl.bench._grade import GradeReport, _report, grade_submission
from mlerl.bench._task import TaskSpec, load_task

DEFAULT_MEMORY_BYTES = 4 * 1024**3
READY_LINE = b'{"ready": true}'
"""The first line a ``--serve`` child writes, once its imports are done."""
MAX_REPLY_BYTES = 1024**2
STDERR_LINES = 20
PARENT_POLL_S = 1.0


def _limit_memory(limit: int) -> None:
    """``preexec_fn`` of a grading child: a single C call, no import (callers may be threaded)."""
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def grade_in_subprocess(task: TaskSpec, submission_path: str | os.PathLike[str],
                        timeout_s: float = 120.0, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> GradeReport:
    """Like :func:`grade_submission`, in a child process killed after ``timeout_s``."""
    path = Path(submission_path)
    request = json.dumps({"task_dir": str(task.task_dir), "data_dir": str(task.data_dir),
                          "submission": str(path), "public_fraction": task.public_fraction})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mlerl.bench._subprocess"], input=request, capture_output=True,
            text=True, timeout=timeout_s, preexec_fn=lambda: _limit_memory(memory_bytes),
        )
    except subprocess.TimeoutExpired:
        return _report(task, path, None, path.is_file(), f"grading timed out after {timeout_s} s")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return GradeReport.from_dict(data)
    except (IndexError, json.JSONDecodeError, KeyError, TypeError):
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return _report(task, path, None, path.is_file(),
                       f"grading process failed (exit {proc.returncode}): {tail[0][:200]}")


# ---- the warm pool (parent side) -----------------------------------------------------------

class _Timeout(Exception):
    """The child did not answer in time."""


class _Failed(Exception):
    """The child died or broke the protocol; ``args[0]`` says how, or is empty for "it exited"."""


def _drain(stream: IO[bytes], tail: collections.deque[str]) -> None:
    """Read a child's stderr to EOF so it never blocks on a full pipe, keeping the last lines."""
    with stream:
        for raw in stream:
            line = raw.decode("utf-8", "replace").strip()
            if line:
                tail.append(line)


def _request_line(task: TaskSpec, path: Path) -> bytes:
    """One request: absolute paths, so a later ``chdir`` of the caller cannot redirect it."""
    return (json.dumps({"task_dir": os.path.abspath(task.task_dir), "data_dir": os.path.abspath(task.data_dir),
                        "submission": os.path.abspath(path), "public_fraction": task.public_fraction})
            + "\n").encode("utf-8")


def _parse_reply(line: bytes, path: Path) -> tuple[GradeReport, bool]:
    """(the report in a reply line with the caller's spelling of the path, whether the child
    announced that it exits after this reply)."""
    try:
        data = json.loads(line)
        report = GradeReport.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _Failed(f"unreadable reply {line[:80]!r}") from None
    return dataclasses.replace(report, submission_path=str(path)), bool(data.get("retire", False))


class _Worker:
    """One ``--serve`` child: its pipes, a buffer of its stdout and the tail of its stderr."""

    def __init__(self, memory_bytes: int) -> None:
        self.proc = subprocess.Popen(
            # runpy warns that mlerl.bench (imported first) already holds this module: harmless
            [sys.executable, "-W", "ignore::RuntimeWarning:runpy", "-m", "mlerl.bench._subprocess", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
            preexec_fn=functools.partial(_limit_memory, memory_bytes),
        )
        self.ready = False
        self.served = 0
        self._buffer = bytearray()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        assert self.proc.stderr is not None
        self._drainer = threading.Thread(target=_drain, args=(self.proc.stderr, self.stderr_tail),
                                         name=f"grader-{self.proc.pid}-stderr", daemon=True)
        self._drainer.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            view = memoryview(data)
            while view:
                view = view[self.proc.stdin.write(view) or 0:]
        except (OSError, ValueError):  # BrokenPipeError: it died; ValueError: the pipe is closed
            raise _Failed("") from None

    def read_line(self, timeout_s: float) -> bytes:
        """The next line of the child's stdout within ``timeout_s``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise _Timeout
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise _Failed("")
                self._buffer += chunk
                if len(self._buffer) > MAX_REPLY_BYTES:
                    raise _Failed(f"reply over {MAX_REPLY_BYTES} bytes")
        line, _, rest = self._buffer.partition(b"\n")
        self._buffer = bytearray(rest)
        return bytes(line)

    def wait_ready(self, timeout_s: float) -> None:
        try:
            line = self.read_line(timeout_s)
        except _Timeout:
            raise _Failed(f"not ready within {timeout_s} s") from None
        if line != READY_LINE:
            raise _Failed(f"unexpected first line {line[:80]!r}")
        self.ready = True

    def kill(self) -> None:
        """Kill the process only (safe from any thread; the pipes stay with the owner)."""
        if self.alive():
            self.proc.kill()

    def reap(self, grace_s: float = 0.0) -> None:
        """Wait up to ``grace_s`` for the process to exit, then kill it; let the drainer read
        its last stderr lines."""
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        self._drainer.join(timeout=1.0)

    def dispose(self, graceful: bool) -> None:
        """End the child (EOF first when ``graceful``), reap it and close the pipes."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.reap(grace_s=5.0 if graceful else 0.0)
        self.proc.stdout.close()

    def last_stderr(self) -> str:
        return self.stderr_tail[-1][:200] if self.stderr_tail else ""


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
    fresh child, so a child killed while idle costs no grade. A child is recycled after ``max_requests`` grades. ``close()`` (or
    leaving a ``with`` block) kills every child.
    """

    def __init__(self, size: int = 2, timeout_s: float = 120.0, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 max_requests: int = 500, start_timeout_s: float = 60.0) -> None:
        for name, value in (("size", size), ("timeout_s", timeout_s), ("memory_bytes", memory_bytes),
                            ("max_requests", max_requests), ("start_timeout_s", start_timeout_s)):
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
        Does not wait for them: a grade asked of a child still importing waits for its ready line."""
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
                return _report(task, path, None, path.is_file(), f"grading process failed (cannot start: {exc})")
            healthy, was_warm = False, worker.served > 0
            try:
                report, healthy = self._ask(worker, task, path)
            finally:
                self._release(worker, healthy)
            # a warm child found dead when asked (killed while idle, OOM-killed by the host)
            # must not cost this submission its grade: once, ask a fresh child
            if healthy or not was_warm or attempt or not report.error.startswith("grading process failed"):
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
        """The most recently used live idle child (call with the lock held); dead ones go to ``dead``."""
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
            return _report(task, path, None, path.is_file(), f"grading timed out after {self.timeout_s} s"), False
        except _Failed as exc:
            worker.reap(grace_s=0.0 if exc.args[0] else 1.0)  # at EOF it is exiting: keep its exit code
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


# ---- the children --------------------------------------------------------------------------

def _grade_request(req: dict[str, Any]) -> dict[str, Any]:
    """Grade one request; the report's MLE-bench keys plus ``error``."""
    task = load_task(Path(req["task_dir"]), Path(req["data_dir"]))
    if "public_fraction" in req:
        task = dataclasses.replace(task, public_fraction=float(req["public_fraction"]))
    report = grade_submission(task, req["submission"])
    return {**report.to_json(), "error": report.error}


def _child() -> None:
    req = json.loads(sys.stdin.read())
    print(json.dumps(_grade_request(req)))


def _exit_with_parent(parent: int) -> None:
    """Exit as soon as the parent is gone, even while a grade is running (daemon thread)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve() -> None:
    """One JSON request per stdin line -> one JSON report per stdout line, until EOF.

    The protocol gets a private copy of stdout; fd 1 is pointed at stderr, so whatever a
    grader prints cannot corrupt a reply. A grade that ran out of memory is answered with
    ``"retire": true``, then the child exits, so the pool replaces a process whose heap may be
    in a bad state.
    """
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _exit_with_parent(os.getppid())
    out.write(READY_LINE.decode() + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _grade_request(json.loads(line))
        retire = "MemoryError" in reply["error"]
        out.write(json.dumps({**reply, "retire": retire}) + "\n")
        out.flush()
        if retire:
            return


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        _child()
