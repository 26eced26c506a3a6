"""Running one program and grading what it left: the actor's execution path, as plain functions.

:func:`execute` is what every action (and every AIDE step, :func:`._evaluate.sandbox_evaluator`)
goes through: ``pipeline.prepare`` instruments the code, ``sandbox.run`` runs it with the task's
public data and time limit under the sandbox's own limits while stdout streams into a marker
scanner, and :func:`grade` grades the submission outside the sandbox.

Guarantees:
- ``INFRA_ERROR`` runs are retried ``retries`` times, each with a fresh scanner; after that the
  result is ``INFRA_ERROR`` and nothing was graded (the caller never rewards it).
- The directories the sandbox collected files into are removed after each attempt.
- ``Executed.duration_s`` is the sandbox's ``duration_s`` (monotonic, never negative); the
  timestamps are the sandbox's wall-clock ones and the grading's end.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlerl.actors._pipeline import Graded, Pipeline, Scanner
from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, ExecutionResult, Limits, OutputCallback, Sandbox

if TYPE_CHECKING:  # mlerl.bench imports pandas: only the type is needed here
    from mlerl.bench import TaskSpec

log = logging.getLogger("mlerl.actors")

PROBE_LIMITS = Limits(wall_time_s=60.0, memory_mb=256)
"""The health probe's own limits: a trivial program, whatever the run's limits are."""


@dataclass
class Executed:
    """What running and grading one program gave."""

    status: ExecStatus
    markers: list[str] = field(default_factory=list)
    graded: Graded = field(default_factory=lambda: Graded(None, False))
    t_started: float | None = None
    t_finished: float | None = None
    t_graded: float | None = None
    duration_s: float = 0.0
    """The execution's duration (0 when nothing ran)."""
    output: str = ""
    """The end of stdout + stderr, cleaned of nonces, at most ``output_tail_chars``."""
    submission: bytes | None = None
    """A valid submission's bytes when at most ``SUBMISSION_KEEP_BYTES`` (the run's best is kept
    whole); None otherwise."""


def _stdout_to(scanner: Scanner) -> OutputCallback:
    def on_output(stream: str, chunk: bytes) -> None:
        if stream == "stdout":
            scanner.feed(chunk)

    return on_output


async def execute(
    code: str,
    task: TaskSpec,
    *,
    sandbox: Sandbox,
    pipeline: Pipeline,
    retries: int,
    tail_chars: int,
    clock: Callable[[], float],
    who: str = "actor",
) -> Executed:
    """Instrument, run (INFRA_ERROR retried ``retries`` times) and grade ``code`` for ``task``."""
    prepared = await pipeline.prepare(code)
    request = ExecutionRequest(
        program=prepared.program, data_dir=task.public_dir, time_limit_s=float(task.time_limit_s)
    )
    for attempt in range(retries + 1):
        scanner = pipeline.scanner(prepared.nonce)
        result = await sandbox.run(request, _stdout_to(scanner))
        try:
            if result.status is not ExecStatus.INFRA_ERROR:
                return await grade(
                    result,
                    scanner.close(),
                    task,
                    prepared.nonce,
                    pipeline=pipeline,
                    tail_chars=tail_chars,
                    clock=clock,
                )
            log.warning("%s: infra error (attempt %d): %s", who, attempt + 1, result.error)
        finally:
            for path in {Path(p).parent for p in result.files.values()}:
                shutil.rmtree(path, ignore_errors=True)
    return Executed(ExecStatus.INFRA_ERROR)


SUBMISSION_KEEP_BYTES = 16 << 20
"""Largest submission an actor keeps in memory and may send with its best sample of a task."""


def _kept_submission(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.stat().st_size <= SUBMISSION_KEEP_BYTES else None
    except OSError:
        return None


async def grade(
    result: ExecutionResult,
    markers: list[str],
    task: TaskSpec,
    nonce: str | None,
    *,
    pipeline: Pipeline,
    tail_chars: int,
    clock: Callable[[], float],
) -> Executed:
    """Grade a run's submission (in a grading process, off the event loop) if it ran OK and
    left one; keep the end of its cleaned output."""
    graded = Graded(None, False, "no submission")
    submission = result.files.get("submission.csv")
    if result.status is ExecStatus.OK and submission is not None:
        graded = await asyncio.to_thread(pipeline.grade, task, Path(submission))
    out, err = result.stdout.text(), result.stderr.text()
    joined = out + ("\n" if out and err and not out.endswith("\n") else "") + err
    output = pipeline.clean(joined, nonce)
    kept = _kept_submission(Path(submission)) if graded.valid and submission else None
    return Executed(
        status=result.status,
        markers=markers,
        graded=graded,
        t_started=result.started_at,
        t_finished=result.finished_at,
        t_graded=clock(),
        duration_s=result.duration_s,
        output=output[len(output) - tail_chars :] if tail_chars else "",
        submission=kept,
    )


async def probe(sandbox: Sandbox) -> bool:
    """Run a trivial program: True when the backend ran it (whatever its status)."""
    try:
        result = await sandbox.run(
            ExecutionRequest(program="pass\n", collect=(), limits=PROBE_LIMITS)
        )
    except Exception:
        log.exception("sandbox probe failed")
        return False
    return result.status is not ExecStatus.INFRA_ERROR
