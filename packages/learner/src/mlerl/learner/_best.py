"""The run's best solution per task, kept as the run goes: ``RUN_DIR/best/<task>/``.

An MLE agent's output is its best solution, so the learner (the one process that sees every
actor's samples) keeps it. Chosen like every selection on the **public** score: a valid sample
replaces the task's best when its signed public score (``reward_parts["score"]``: the raw
metric, negated when lower is better, so higher is always better) is strictly higher; the first
of equal scores stays. Its directory holds

==================  =========================================================================
``solution.json``   task, sample id, prompt kind, parent, learner step and policy version, the
                    task's execution count when it arrived, seconds since the run started,
                    public and private scores, reward, execution seconds, whether the
                    submission is kept
``plan.md``         the plan the response gave
``program.py``      the program as generated (before instrumentation)
``output.txt``      the end of its terminal output, as the actor kept it
``submission.csv``  its submission file, when the actor sent it (an actor sends the
                    submission of each sample that beats its own best so far, up to its size
                    cap); otherwise ``solution.json`` says so
==================  =========================================================================

A new best is written to a fresh directory and swapped in with two renames; a crash between
them leaves ``.<task>.old``, which the next start puts back. On resume the best so far is read
back from ``solution.json`` and the execution counts from ``samples.jsonl``, so a resumed run
keeps its best and counts on.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

from mlerl.protocol import ExecStatus, Sample

SOLUTION = "solution.json"


def signed_public(sample: Sample) -> float | None:
    """The sample's public score signed so that higher is better, None unless it is valid."""
    if not sample.valid_submission or sample.score is None or not math.isfinite(sample.score):
        return None
    signed = sample.reward_parts.get("score")
    return float(signed) if signed is not None and math.isfinite(signed) else None


def task_dirname(task_id: str) -> str:
    """A file name for ``task_id`` (characters outside ``[A-Za-z0-9._-]`` become ``_``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).lstrip(".")
    return name or "_"


class BestSolutions:
    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / "best"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._recover()
        self.best: dict[str, float] = {}
        """Per task: the signed public score of the solution in ``best/<task>/``."""
        for path in self.dir.glob(f"*/{SOLUTION}"):
            info = json.loads(path.read_text())
            self.best[info["task_id"]] = float(info["signed_public"])
        self.executions: dict[str, int] = count_executions(run_dir / "samples.jsonl")
        """Per task: samples received so far (infra errors excluded, as in ``samples.jsonl``)."""

    def _recover(self) -> None:
        for tmp in self.dir.glob(".*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True)
        for old in self.dir.glob(".*.old"):
            live = self.dir / old.name[1:].removesuffix(".old")
            if live.exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.rename(live)

    def offer(self, sample: Sample, record: dict[str, Any]) -> bool:
        """Count ``sample`` and keep it when it is the task's new best; True when it is.
        ``record`` is its ``samples.jsonl`` record (step and time)."""
        if sample.exec_status is ExecStatus.INFRA_ERROR:
            return False
        task = sample.task_id
        self.executions[task] = self.executions.get(task, 0) + 1
        signed = signed_public(sample)
        if signed is None or (task in self.best and signed <= self.best[task]):
            return False
        self._write(sample, record, signed)
        self.best[task] = signed
        return True

    def _write(self, sample: Sample, record: dict[str, Any], signed: float) -> None:
        name = task_dirname(sample.task_id)
        live, tmp, old = (self.dir / p for p in (name, f".{name}.tmp", f".{name}.old"))
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        (tmp / "plan.md").write_text(sample.plan, encoding="utf-8")
        (tmp / "program.py").write_text(sample.code, encoding="utf-8")
        (tmp / "output.txt").write_text(sample.output_tail, encoding="utf-8")
        if sample.submission is not None:
            (tmp / "submission.csv").write_bytes(sample.submission)
        info = {
            "task_id": sample.task_id,
            "sample_id": sample.sample_id,
            "kind": sample.prompt_kind.value,
            "parent_id": sample.parent_id,
            "step": record.get("step"),
            "policy_version": sample.policy_version,
            "executions": self.executions[sample.task_id],
            "t": record.get("t"),
            "public_score": sample.score,
            "private_score": sample.private_score,
            "signed_public": signed,
            "reward": sample.reward,
            "duration_s": sample.duration_s,
            "submission": "submission.csv" if sample.submission is not None else None,
            "submission_note": ""
            if sample.submission is not None
            else "not sent by the actor (over its size cap, or an actor without the field)",
        }
        (tmp / SOLUTION).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        if live.exists():
            live.rename(old)
        tmp.rename(live)
        shutil.rmtree(old, ignore_errors=True)


def count_executions(samples_jsonl: Path) -> dict[str, int]:
    """Per task, the records of ``samples.jsonl`` (an unreadable last line, cut by a crash, is
    not counted)."""
    counts: dict[str, int] = {}
    if not samples_jsonl.is_file():
        return counts
    with open(samples_jsonl, encoding="utf-8") as fh:
        for line in fh:
            try:
                task = json.loads(line)["task_id"]
            except (ValueError, KeyError, TypeError):
                continue
            counts[task] = counts.get(task, 0) + 1
    return counts


def read_best(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per task, the ``solution.json`` of the run's best solution (empty when none)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((Path(run_dir) / "best").glob(f"*/{SOLUTION}")):
        info = json.loads(path.read_text())
        out[info["task_id"]] = info
    return out
