"""Grading in a separate process with a wall-clock timeout and a memory cap.

The score is computed outside the sandbox *and* outside the caller's process (threat model
row 22): a grader that hangs or exhausts memory on a hostile file is killed, and the caller
gets an invalid report whose ``error`` says why. The child is ``python -m
mlerl.bench._subprocess`` reading one JSON request on stdin and writing one JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlerl.bench._grade import GradeReport, _report, grade_submission
from mlerl.bench._task import TaskSpec, load_task

DEFAULT_MEMORY_BYTES = 4 * 1024**3


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def grade_in_subprocess(task: TaskSpec, submission_path: str | os.PathLike[str],
                        timeout_s: float = 120.0, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> GradeReport:
    """Like :func:`grade_submission`, in a child process killed after ``timeout_s``."""
    path = Path(submission_path)
    request = json.dumps({"task_dir": str(task.task_dir), "data_dir": str(task.data_dir),
                          "submission": str(path)})
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


def _child() -> None:
    req = json.loads(sys.stdin.read())
    task = load_task(Path(req["task_dir"]), Path(req["data_dir"]))
    report = grade_submission(task, req["submission"])
    print(json.dumps({**report.to_dict(), "error": report.error}))


if __name__ == "__main__":
    _child()
