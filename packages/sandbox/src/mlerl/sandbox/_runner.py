"""What every backend shares: admission control, the run's life cycle and the status rules.

Guarantees:
- At most ``max_concurrency`` executions run; at most ``queue_size`` more wait; a further
  ``run`` call blocks until room frees (backpressure to the scheduler). Cancelling a caller
  releases its place.
- ``run`` returns an :class:`ExecutionResult` for anything the program does; a harness or
  engine failure is ``INFRA_ERROR`` (never the program's fault); cancellation propagates.
- A backend that reports ``setup_failed`` (the program never started) is retried up to
  ``SETUP_ATTEMPTS`` times, each on a fresh work dir; then INFRA_ERROR.
- The work dir is removed (tmpfs unmounted) in ``finally``, after the requested files were
  copied out; the backend's cleanup (cgroup, container) runs in its own ``finally``.
Status precedence: INFRA_ERROR > OUTPUT_LIMIT > TIMEOUT > OOM > exit code (0 -> OK).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from mlerl.protocol import ExecStatus
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._types import (
    ExecutionRequest,
    ExecutionResult,
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


def _explain(status: ExecStatus, outcome: Outcome, request: ExecutionRequest) -> str:
    lim = request.limits
    return {
        ExecStatus.INFRA_ERROR: outcome.infra_error,
        ExecStatus.OUTPUT_LIMIT: f"output exceeded {lim.output_bytes} bytes; killed",
        ExecStatus.TIMEOUT: f"wall time {lim.wall_time_s:g} s exceeded; killed",
        ExecStatus.OOM: f"memory limit {lim.memory_mb} MB exceeded; killed",
    }.get(status, "")


SETUP_ATTEMPTS = 3

Execute = Callable[[ExecutionRequest, WorkDir, OutputSink], Awaitable[Outcome]]
MakeWorkDir = Callable[[ExecutionRequest], WorkDir]


async def run_request(
    config: SandboxConfig, admission: Admission, make_workdir: MakeWorkDir,
    execute: Execute, request: ExecutionRequest, on_output: OutputCallback | None,
) -> ExecutionResult:
    """Admit, prepare, execute, collect, clean up; the body of every backend's ``run``."""
    async with admission.slot():
        sink = OutputSink(request.limits.output_bytes, on_output)
        outcome = Outcome(started_at=time.time())
        files: dict[str, Path] = {}
        problems: list[str] = []
        for attempt in range(SETUP_ATTEMPTS):
            wd: WorkDir | None = None
            try:
                wd = make_workdir(request)  # fresh for every attempt: main.py as submitted
                outcome = await execute(request, wd, sink)
                if not outcome.setup_failed:
                    files, problems = collect(wd.path, request.collect,
                                              str(Path(config.work_root) / "collected"),
                                              request.limits.collect_max_bytes)
            except OSError as exc:
                outcome.infra_error = f"sandbox host error: {type(exc).__name__}: {exc}"
            finally:
                if wd is not None:
                    await asyncio.to_thread(wd.remove)
            if not outcome.setup_failed:
                break
            setup_error = sink.streams["stderr"].result().text().strip()[-500:]
            sink.reset()
            await asyncio.sleep(0.05 * (attempt + 1))
        else:
            outcome.infra_error = (f"sandbox setup failed {SETUP_ATTEMPTS} times: "
                                   f"{setup_error}")
        if not outcome.finished_at:
            outcome.finished_at = time.time()
        status = decide(outcome, sink)
        notes = [n for n in (_explain(status, outcome, request), *problems,
                             sink.callback_error, outcome.note) if n]
        stdout, stderr = sink.results()
        return ExecutionResult(
            status=status, exit_code=outcome.exit_code, started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            duration_s=max(0.0, outcome.finished_at - outcome.started_at),
            stdout=stdout, stderr=stderr, files=files, error="; ".join(notes),
        )
