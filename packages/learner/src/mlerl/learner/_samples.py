"""What the learner records of the samples it receives: ``RUN_DIR/samples.jsonl`` (one record per
sample, :class:`SampleLog`), the W&B samples table (:func:`log_samples_table`) and, through
:class:`mlerl.learner._best.BestSolutions`, the run's best solution per task."""

from __future__ import annotations

import collections
import json
import math
import time
from pathlib import Path
from typing import Any

from mlerl.learner._best import BestSolutions
from mlerl.protocol import ExecStatus, MediaSink, MetricsSink, Sample

SAMPLES_TABLE_COLUMNS = (
    "step",
    "task_id",
    "kind",
    "sample_id",
    "parent_id",
    "plan",
    "program",
    "output_tail",
    "parse",
    "status",
    "reward",
    "public_score",
    "private_score",
    "valid",
    "duration_s",
    "policy_version",
)
"""The columns of the W&B ``learner/samples`` table (``MetricsConfig.wandb_samples_per_update``)."""

_TABLE_TEXT_LIMITS = {"plan": 1000, "program": 4000, "output_tail": 400}
"""Characters a samples-table cell keeps of each long text (``samples.jsonl`` keeps them whole)."""


def cut(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else its head and a note of the rest."""
    if len(text) <= limit:
        return text
    note = f"\n... ({len(text) - limit} more characters)"
    return text[:limit] + note


class SampleLog:
    """``RUN_DIR/samples.jsonl``: one record per sample received (and ``RUN_DIR/best/``, the best
    solution per task so far, :mod:`mlerl.learner._best`), the input of ``mlerl tasks
    compare`` (fields of docs/bench.md; ``score`` is the public leaderboard's, which the reward
    read, ``private_score`` the private one's) plus reward, policy version, sample and parent id,
    parse
    status, response length, markers, the plan, the program and the last 400 characters of its
    output (so a run can be read, not only averaged).

    ``t`` is seconds since the run first started (kept in ``RUN_DIR/started_at`` so a resumed
    run continues the same clock); ``step`` is the learner version when the sample arrived.
    Records are queued when a sample is stored and written after the journal commit, so a
    record never describes a sample the journal may still lose (a crash between commit and
    write can drop a record, never duplicate one). The journal stays the source of truth.

    ``table_rows`` > 0 also keeps, for the W&B samples table, the newest ``table_rows`` committed
    records since the last :meth:`take_table` (columns :data:`SAMPLES_TABLE_COLUMNS`)."""

    def __init__(self, run_dir: Path, method: str, seed: int, table_rows: int = 0) -> None:
        marker = run_dir / "started_at"
        if not marker.exists():
            marker.write_text(repr(time.time()))
        self.t0 = float(marker.read_text())
        self.method, self.seed = method, seed
        self._pending: list[dict[str, Any]] = []
        self._pending_samples: list[Sample] = []
        self.best = BestSolutions(run_dir)
        """``RUN_DIR/best/<task>/``: the best solution so far per task (``_best``)."""
        self._table: collections.deque[list[Any]] = collections.deque(maxlen=max(table_rows, 0))
        self._file = open(run_dir / "samples.jsonl", "a", encoding="utf-8")  # noqa: SIM115 - open for the process's lifetime, closed by close()

    def add(self, sample: Sample, step: int) -> None:
        if sample.exec_status is ExecStatus.INFRA_ERROR:
            return
        t = (sample.t_graded or sample.t_exec_finished or sample.t_sampled) - self.t0
        score = sample.score if sample.score is None or math.isfinite(sample.score) else None
        private = sample.private_score
        private = private if private is None or math.isfinite(private) else None
        record = {
            "method": self.method,
            "seed": self.seed,
            "step": step,
            "task_id": sample.task_id,
            "score": score,
            "private_score": private,
            "valid": sample.valid_submission,
            "duration_s": sample.duration_s,
            "t": round(t, 3),
            "reward": sample.reward,
            "policy_version": sample.policy_version,
            "status": sample.exec_status.value,
            "kind": sample.prompt_kind.value,
            "sample_id": sample.sample_id,
            "parent_id": sample.parent_id,
            "parent_reward": sample.parent_reward,
            "parse": sample.parse_status.value,
            "response_tokens": len(sample.response_ids),
            "markers": list(sample.markers),
            "plan": sample.plan,
            "code": sample.code,
            "output_tail": sample.output_tail[-400:],
        }
        self._pending.append(record)
        self._pending_samples.append(sample)

    def flush(self) -> None:
        """Keep any new best solution, then write the queued records (call after the journal
        commit). In this order a crash between the two can leave a best whose record is not
        written, never a record whose best was lost."""
        for sample, record in zip(self._pending_samples, self._pending, strict=True):
            self.best.offer(sample, record)
        self._pending_samples.clear()
        self._file.writelines(json.dumps(record) + "\n" for record in self._pending)
        self._file.flush()
        if self._table.maxlen:
            self._table.extend(table_row(record) for record in self._pending)
        self._pending.clear()

    def take_table(self) -> list[list[Any]]:
        """The table rows kept since the last call (oldest first), and forget them."""
        rows = list(self._table)
        self._table.clear()
        return rows

    def close(self) -> None:
        self._file.close()


def table_row(record: dict[str, Any]) -> list[Any]:
    """A ``samples.jsonl`` record as a row of :data:`SAMPLES_TABLE_COLUMNS`, long texts cut."""
    texts = {
        "plan": record["plan"],
        "program": record["code"],
        "output_tail": record["output_tail"],
    }
    cells = {
        **record,
        "public_score": record["score"],
        **{k: cut(v, _TABLE_TEXT_LIMITS[k]) for k, v in texts.items()},
    }
    return [cells[column] for column in SAMPLES_TABLE_COLUMNS]


def log_samples_table(samples: SampleLog, sink: MetricsSink, step: int) -> None:
    """The rows ``samples`` kept since the last update as the ``learner/samples`` table at
    ``step`` (sinks without tables, or no rows: nothing)."""
    rows = samples.take_table()
    if rows and isinstance(sink, MediaSink):
        sink.log_table("samples", SAMPLES_TABLE_COLUMNS, rows, step)
