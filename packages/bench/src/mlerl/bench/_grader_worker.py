"""One warm grading child seen from its parent: :class:`_Worker` owns a ``python -m
mlerl.bench._subprocess --serve`` process under ``RLIMIT_AS``, its pipes, a buffer of its
stdout and the tail of its stderr.

It speaks the child's line protocol (:mod:`mlerl.bench._subprocess`): wait for the ready line,
write one JSON request line, read one JSON report line within a timeout. A reply that does not
come in time raises :class:`_Timeout`; a child that exits, closes its pipe or writes garbage (or
a line over :data:`MAX_REPLY_BYTES`) raises :class:`_Failed`. What to do then is the pool's
business (:mod:`mlerl.bench._grader_pool`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from mlerl.bench._grade import GradeReport
from mlerl.bench._subprocess import READY_LINE, _limit_memory
from mlerl.bench._task import TaskSpec

MAX_REPLY_BYTES = 1024**2
STDERR_LINES = 20


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
    return (
        json.dumps(
            {
                "task_dir": os.path.abspath(task.task_dir),
                "data_dir": os.path.abspath(task.data_dir),
                "submission": os.path.abspath(path),
                "public_fraction": task.public_fraction,
            }
        )
        + "\n"
    ).encode("utf-8")


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
            [
                sys.executable,
                "-W",
                "ignore::RuntimeWarning:runpy",
                "-m",
                "mlerl.bench._subprocess",
                "--serve",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            preexec_fn=functools.partial(_limit_memory, memory_bytes),
        )
        self.ready = False
        self.served = 0
        self._buffer = bytearray()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        assert self.proc.stderr is not None
        self._drainer = threading.Thread(
            target=_drain,
            args=(self.proc.stderr, self.stderr_tail),
            name=f"grader-{self.proc.pid}-stderr",
            daemon=True,
        )
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
                view = view[self.proc.stdin.write(view) or 0 :]
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
