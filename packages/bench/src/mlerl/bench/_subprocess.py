"""The grading process: a separate Python process with a wall-clock timeout and a memory cap.

The score is computed outside the sandbox *and* outside the caller's process (threat model
row 22): a grader that hangs or exhausts memory on a hostile file is killed, and the caller
gets an invalid report whose ``error`` says why. This module is the child's program
(``python -m mlerl.bench._subprocess [--serve]``) and the simplest way to call it:

- :func:`grade_in_subprocess`: one fresh ``python -m mlerl.bench._subprocess`` per submission,
  reading one JSON request on stdin and writing one JSON report (pays the interpreter start
  and the pandas import every time).
- ``--serve`` (:func:`_serve`): a long-lived child reading one JSON request per line on stdin
  and writing one JSON report per line on stdout, after a :data:`READY_LINE`; it exits on EOF
  on stdin or when its parent is gone, so no grader outlives its caller. Its parent side is
  :class:`mlerl.bench._grader_pool.GraderPool` (the pool) over
  :class:`mlerl.bench._grader_worker._Worker` (one child).
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mlerl.bench._grade import GradeReport, _report, grade_submission
from mlerl.bench._task import TaskSpec, load_task

DEFAULT_MEMORY_BYTES = 4 * 1024**3
READY_LINE = b'{"ready": true}'
"""The first line a ``--serve`` child writes, once its imports are done."""
PARENT_POLL_S = 1.0


def _limit_memory(limit: int) -> None:
    """``preexec_fn`` of a grading child: a single C call, no import (callers may be threaded)."""
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def grade_in_subprocess(
    task: TaskSpec,
    submission_path: str | os.PathLike[str],
    timeout_s: float = 120.0,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> GradeReport:
    """Like :func:`grade_submission`, in a child process killed after ``timeout_s``."""
    path = Path(submission_path)
    request = json.dumps(
        {
            "task_dir": str(task.task_dir),
            "data_dir": str(task.data_dir),
            "submission": str(path),
            "public_fraction": task.public_fraction,
        }
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mlerl.bench._subprocess"],
            input=request,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            preexec_fn=lambda: _limit_memory(memory_bytes),
        )
    except subprocess.TimeoutExpired:
        return _report(task, path, None, path.is_file(), f"grading timed out after {timeout_s} s")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return GradeReport.from_dict(data)
    except (IndexError, json.JSONDecodeError, KeyError, TypeError):
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return _report(
            task,
            path,
            None,
            path.is_file(),
            f"grading process failed (exit {proc.returncode}): {tail[0][:200]}",
        )


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
