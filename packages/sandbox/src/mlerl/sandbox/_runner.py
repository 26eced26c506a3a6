"""What every backend shares: admission control, the run's life cycle, the race of a program's
exit against its limits (:func:`exit_or_limit`) and the status rules.

Every backend's ``run`` reads the same (:func:`admitted` and :meth:`Execution.attempt` are the
two async context managers it enters; the backend supplies its work dir and its ``execute``)::

    async with admitted(config, admission, request, on_output) as run:
        while run.another_attempt():
            async with run.attempt() as attempt:
                attempt.workdir = make_workdir(run.request)
                run.outcome = await execute(run.request, attempt.workdir, run.sink)
    return run.result()

Guarantees:
- At most ``max_concurrency`` executions run; at most ``queue_size`` more wait; a further
  ``run`` call blocks until room frees (backpressure to the scheduler). Cancelling a caller
  releases its place.
- The limits in force are the sandbox's own (``SandboxConfig.limits``) unless the request
  carries its own; a wall time of 0 there is the request's ``time_limit_s`` (the task's). A
  request left without a positive wall time fails with ``ConfigError`` before it is admitted.
- ``run`` returns an :class:`ExecutionResult` for anything the program does; a harness or
  engine failure is ``INFRA_ERROR`` (never the program's fault); cancellation propagates.
- A backend that reports ``setup_failed`` (the program never started) is retried up to
  ``SETUP_ATTEMPTS`` times, each on a fresh work dir; then INFRA_ERROR.
- The work dir is removed (tmpfs unmounted) in ``finally``, after the requested files were
  copied out; the backend's cleanup (cgroup, container) runs in its own ``finally``.
- ``duration_s`` is measured on the monotonic clock from the program's start to its end (never
  negative, whatever the wall clock does); ``started_at``/``finished_at`` are wall-clock stamps
  of the same moments.
Status precedence: INFRA_ERROR > OUTPUT_LIMIT > TIMEOUT > OOM > exit code (0 -> OK).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlerl.protocol import ExecStatus, check
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._types import (
    ExecutionRequest,
    ExecutionResult,
    Limits,
    OutputCallback,
    SandboxConfig,
)
from mlerl.sandbox._workdir import WorkDir, collect


@dataclass
class Outcome:
    """What a backend observed about one execution."""

    exit_code: int | None = None
    timed_out: bool = False
    oom: bool = False
    infra_error: str = ""
    setup_failed: bool = False
    """The sandbox could not be set up (the program never ran); retried on a fresh work dir."""
    note: str = ""
    """A cleanup problem that does not change the status (e.g. a container left to reap)."""
    started_at: float = 0.0
    finished_at: float = 0.0
    _started: float = field(default_factory=time.monotonic, repr=False)
    _finished: float | None = field(default=None, repr=False)

    def start(self) -> None:
        """The program starts now (both clocks)."""
        self.started_at, self._started = time.time(), time.monotonic()

    def finish(self) -> None:
        """The program ended (or was stopped) now (both clocks)."""
        self.finished_at, self._finished = time.time(), time.monotonic()

    @property
    def duration_s(self) -> float:
        """Monotonic seconds from :meth:`start` to :meth:`finish` (0 if it never finished)."""
        return 0.0 if self._finished is None else self._finished - self._started


def started() -> Outcome:
    """An outcome whose program starts now."""
    out = Outcome()
    out.start()
    return out


class Admission:
    """A global concurrency limit with a bounded waiting room."""

    def __init__(self, max_concurrency: int, queue_size: int) -> None:
        self._slots = asyncio.Semaphore(max_concurrency)
        self._room = asyncio.Semaphore(max_concurrency + queue_size)
        self.running = 0
        self.waiting = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._room:
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1
                self._slots.release()


def limits_in_force(defaults: Limits, request: ExecutionRequest) -> Limits:
    """The request's own limits, else the sandbox's ``defaults``; a wall time of 0 there is the
    request's ``time_limit_s`` (see the module docstring)."""
    base = request.limits if request.limits is not None else defaults
    wall = base.wall_time_s or request.time_limit_s or 0.0
    check(
        wall > 0,
        "limits.wall_time_s",
        "no wall-clock limit: the sandbox's limits.wall_time_s "
        "is 0 and the request carries no time_limit_s",
    )
    return base if wall == base.wall_time_s else dataclasses.replace(base, wall_time_s=wall)


def decide(outcome: Outcome, sink: OutputSink) -> ExecStatus:
    """The status rules (see the module docstring)."""
    if outcome.infra_error:
        return ExecStatus.INFRA_ERROR
    if sink.over_limit:
        return ExecStatus.OUTPUT_LIMIT
    if outcome.timed_out:
        return ExecStatus.TIMEOUT
    if outcome.oom:
        return ExecStatus.OOM
    return ExecStatus.OK if outcome.exit_code == 0 else ExecStatus.PROGRAM_ERROR


async def exit_or_limit(
    tg: asyncio.TaskGroup,
    exited: asyncio.Task[Any],
    limit_hit: asyncio.Event,
    lim: Limits,
    out: Outcome,
    stop: Callable[[float], Awaitable[None]],
) -> bool:
    """Wait for whichever comes first: the program's exit (``exited``), its output limit
    (``limit_hit``, set by the backend's output pump) or its wall time (``lim.wall_time_s``).

    If it had not exited, record whether the wall time ran out (``out.timed_out``) and
    ``await stop(grace)``: ``lim.kill_grace_s`` after the wall time (TERM, grace, KILL), 0 after
    the output limit (KILL at once). Returns True when the program was stopped. The task that
    waits for ``limit_hit`` belongs to the caller's ``tg`` and is cancelled on the way out.
    """
    hit = tg.create_task(limit_hit.wait())
    try:
        done, _ = await asyncio.wait(
            {exited, hit}, timeout=lim.wall_time_s, return_when=asyncio.FIRST_COMPLETED
        )
        if exited in done:
            return False
        out.timed_out = hit not in done
        await stop(lim.kill_grace_s if out.timed_out else 0.0)
        return True
    finally:
        hit.cancel()


def _explain(status: ExecStatus, outcome: Outcome, lim: Limits) -> str:
    return {
        ExecStatus.INFRA_ERROR: outcome.infra_error,
        ExecStatus.OUTPUT_LIMIT: f"output exceeded {lim.output_bytes} bytes; killed",
        ExecStatus.TIMEOUT: f"wall time {lim.wall_time_s:g} s exceeded; killed",
        ExecStatus.OOM: f"memory limit {lim.memory_mb} MB exceeded; killed",
    }.get(status, "")


SETUP_ATTEMPTS = 3


@dataclass
class Attempt:
    """One attempt's work dir, set by the backend inside :meth:`Execution.attempt`."""

    workdir: WorkDir | None = None


class Execution:
    """One admitted request on its way through a backend (see the module docstring)."""

    def __init__(
        self, config: SandboxConfig, request: ExecutionRequest, on_output: OutputCallback | None
    ) -> None:
        self.config = config
        self.request = request
        """The request with the limits in force (``request.limits`` is never None here)."""
        assert request.limits is not None
        self.limits: Limits = request.limits
        self.sink = OutputSink(self.limits.output_bytes, on_output)
        self.outcome = started()
        """What the backend's last attempt observed."""
        self.files: dict[str, Path] = {}
        self.problems: list[str] = []
        self.attempts = 0
        self._setup_error = ""

    def another_attempt(self) -> bool:
        """Whether to run (again): the first attempt, or the last one's set-up failed and
        attempts are left (then INFRA_ERROR once they are not)."""
        if self.attempts == 0:
            return True
        if not self.outcome.setup_failed:
            return False
        if self.attempts < SETUP_ATTEMPTS:
            return True
        self.outcome.infra_error = (
            f"sandbox setup failed {SETUP_ATTEMPTS} times: {self._setup_error}"
        )
        return False

    @contextlib.asynccontextmanager
    async def attempt(self) -> AsyncIterator[Attempt]:
        """One attempt on a fresh work dir (``main.py`` as submitted) that the backend creates
        inside: its files are collected after a run that started, it is removed in any case,
        and a host error (``OSError``) is INFRA_ERROR."""
        self.attempts += 1
        attempt = Attempt()
        try:
            yield attempt
            if not self.outcome.setup_failed and attempt.workdir is not None:
                self.files, self.problems = collect(
                    attempt.workdir.path,
                    self.request.collect,
                    str(Path(self.config.work_root) / "collected"),
                    self.limits.collect_max_bytes,
                )
        except OSError as exc:
            self.outcome.infra_error = f"sandbox host error: {type(exc).__name__}: {exc}"
        finally:
            if attempt.workdir is not None:
                await asyncio.to_thread(attempt.workdir.remove)
        if self.outcome.setup_failed:
            self._setup_error = self.sink.streams["stderr"].result().text().strip()[-500:]
            self.sink.reset()
            await asyncio.sleep(0.05 * self.attempts)

    def result(self) -> ExecutionResult:
        out = self.outcome
        if not out.finished_at:
            out.finish()
        status = decide(out, self.sink)
        notes = [
            n
            for n in (
                _explain(status, out, self.limits),
                *self.problems,
                self.sink.callback_error,
                out.note,
            )
            if n
        ]
        stdout, stderr = self.sink.results()
        return ExecutionResult(
            status=status,
            exit_code=out.exit_code,
            started_at=out.started_at,
            finished_at=out.finished_at,
            duration_s=out.duration_s,
            stdout=stdout,
            stderr=stderr,
            files=self.files,
            error="; ".join(notes),
        )


@contextlib.asynccontextmanager
async def admitted(
    config: SandboxConfig,
    admission: Admission,
    request: ExecutionRequest,
    on_output: OutputCallback | None,
) -> AsyncIterator[Execution]:
    """Hold an admission slot for ``request`` (its limits resolved first, so a request without
    a wall time fails before it waits)."""
    limits = limits_in_force(config.limits, request)
    resolved = request if limits is request.limits else dataclasses.replace(request, limits=limits)
    async with admission.slot():
        yield Execution(config, resolved, on_output)
