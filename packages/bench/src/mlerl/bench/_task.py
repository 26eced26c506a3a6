"""Task specs and the registry.

A task is a directory holding ``task.yaml`` and ``description.md``; its data lives under
``<data_dir>/<id>/prepared/public`` (what a program sees at ``./input/``) and
``<data_dir>/<id>/prepared/private`` (answers, never shown to programs), exactly MLE-bench's
layout, so an existing ``mlebench prepare`` output is read unchanged. Built-in tasks ship in
this package (``mlerl/bench/tasks``); ``--tasks-dir`` adds or overrides tasks by id.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BUILTIN_TASKS_DIR = Path(__file__).parent / "tasks"
MODALITIES = ("tabular", "text", "image")
DEFAULT_MAX_SUBMISSION_BYTES = 256 * 1024 * 1024
DEFAULT_PUBLIC_FRACTION = 0.5
"""Share of a task's answer rows on its public leaderboard (see :mod:`mlerl.bench._split`):
half, so that on the tiny stand-ins (~100 answers) the reward's part and the reported part are
equally precise; Kaggle's public share is often 20-30% of a test set far larger than ours."""


class TaskError(ValueError):
    """A task spec is malformed or a task is unknown / not prepared."""


def default_data_dir() -> Path:
    """MLE-bench's cache location: ``$XDG_CACHE_HOME/mle-bench/data`` (~/.cache by default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mle-bench" / "data"


@dataclass(frozen=True)
class Thresholds:
    """Medal thresholds (scores at Kaggle's progression positions) and where they come from."""

    gold: float
    silver: float
    bronze: float
    median: float
    source: str
    """Provenance: a leaderboard file, an estimate from the paper's notes, or a calibration."""


@dataclass(frozen=True)
class TaskSpec:
    """One benchmark task, as loaded from ``task.yaml`` plus the data directory."""

    id: str
    grader: str
    """Key into :data:`mlerl.bench._graders.GRADERS`."""
    metric: str
    lower_is_better: bool
    description: str
    task_dir: Path
    data_dir: Path
    id_column: str
    target_columns: tuple[str, ...]
    modality: str
    time_limit_s: float
    thresholds: Thresholds | None
    files: dict[str, str] = field(default_factory=dict)
    split: str = ""
    kind: str = "mlebench"
    """"mlebench" (a real Kaggle task) or "standin" (offline, built by ``prepare``)."""
    source: str = ""
    leaderboard: Path | None = None
    max_submission_bytes: int = DEFAULT_MAX_SUBMISSION_BYTES
    extra: dict[str, Any] = field(default_factory=dict)
    public_fraction: float = DEFAULT_PUBLIC_FRACTION
    """Share of the answer rows on the public leaderboard, in (0, 1]; 1: no split, both scores
    are the full-answer score (the paper). ``task.yaml``'s ``public_fraction``, or the run's
    ``tasks.public_fraction`` for every task."""

    def __post_init__(self) -> None:
        if not (
            isinstance(self.public_fraction, int | float) and 0.0 < self.public_fraction <= 1.0
        ):
            raise TaskError(
                f"task {self.id}: public_fraction must lie in (0, 1], got {self.public_fraction!r}"
            )

    @property
    def public_dir(self) -> Path:
        return self.data_dir / self.id / "prepared" / "public"

    @property
    def private_dir(self) -> Path:
        return self.data_dir / self.id / "prepared" / "private"

    @property
    def submission_columns(self) -> tuple[str, ...]:
        return (self.id_column, *self.target_columns)

    @property
    def answers_path(self) -> Path:
        return self.private_dir / self.files.get("answers", "answers.csv")

    @property
    def sample_submission_path(self) -> Path:
        return self.public_dir / self.files.get("sample_submission", "sample_submission.csv")

    @property
    def stamp_path(self) -> Path:
        """A stand-in's record of what built its prepared data (``extra``, with its
        ``data_version``): a prepared dir whose stamp differs is stale and is built again."""
        return self.data_dir / self.id / "prepared" / "standin.json"

    def stamp(self) -> str:
        return json.dumps(self.extra, sort_keys=True)

    def is_prepared(self) -> bool:
        if not (self.answers_path.is_file() and self.public_dir.is_dir()):
            return False
        if self.kind == "standin" and "data_version" in self.extra:
            try:
                return self.stamp_path.read_text(encoding="utf-8") == self.stamp()
            except OSError:
                return False
        return True


def _req(raw: dict[str, Any], key: str, path: Path) -> Any:
    if key not in raw:
        raise TaskError(f"{path}: missing required key {key!r}")
    return raw[key]


def _thresholds(raw: Any, path: Path) -> Thresholds | None:
    if raw is None:
        return None
    try:
        return Thresholds(
            gold=float(raw["gold"]),
            silver=float(raw["silver"]),
            bronze=float(raw["bronze"]),
            median=float(raw["median"]),
            source=str(raw["source"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TaskError(
            f"{path}: thresholds need gold/silver/bronze/median/source ({exc})"
        ) from None


def load_task(task_dir: Path, data_dir: Path) -> TaskSpec:
    """Parse ``task_dir/task.yaml`` (+ ``description.md``) into a :class:`TaskSpec`."""
    path = task_dir / "task.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: cannot read ({exc})") from None
    if not isinstance(raw, dict):
        raise TaskError(f"{path}: top level must be a mapping")
    direction = _req(raw, "direction", path)
    if direction not in ("maximize", "minimize"):
        raise TaskError(f"{path}: direction must be 'maximize' or 'minimize'")
    modality = _req(raw, "modality", path)
    if modality not in MODALITIES:
        raise TaskError(f"{path}: modality must be one of {MODALITIES}")
    desc = task_dir / "description.md"
    lb = raw.get("leaderboard")
    return TaskSpec(
        id=str(_req(raw, "id", path)),
        grader=str(_req(raw, "grader", path)),
        metric=str(_req(raw, "metric", path)),
        lower_is_better=direction == "minimize",
        description=desc.read_text(encoding="utf-8") if desc.is_file() else "",
        task_dir=task_dir,
        data_dir=data_dir,
        id_column=str(_req(raw, "id_column", path)),
        target_columns=tuple(str(c) for c in _req(raw, "target_columns", path)),
        modality=modality,
        time_limit_s=float(raw.get("time_limit_s", 600)),
        thresholds=_thresholds(raw.get("thresholds"), path),
        files=dict(raw.get("files") or {}),
        split=str(raw.get("split", "")),
        kind=str(raw.get("kind", "mlebench")),
        source=str(raw.get("source", "")),
        leaderboard=task_dir / lb if lb else None,
        max_submission_bytes=int(raw.get("max_submission_bytes", DEFAULT_MAX_SUBMISSION_BYTES)),
        extra=dict(raw.get("extra") or {}),
        public_fraction=float(raw.get("public_fraction", DEFAULT_PUBLIC_FRACTION)),
    )


class Registry:
    """All known tasks: the built-in ones, then those under ``tasks_dir`` (same id overrides)."""

    def __init__(self, tasks: dict[str, TaskSpec], data_dir: Path) -> None:
        self._tasks = tasks
        self.data_dir = data_dir

    @classmethod
    def load(
        cls,
        tasks_dir: str | Path | None = None,
        data_dir: str | Path | None = None,
        public_fraction: float | None = None,
    ) -> Registry:
        """``public_fraction`` (a run's ``tasks.public_fraction``) overrides every task's."""
        data = Path(data_dir).expanduser() if data_dir else default_data_dir()
        tasks: dict[str, TaskSpec] = {}
        roots = [BUILTIN_TASKS_DIR] + ([Path(tasks_dir)] if tasks_dir else [])
        for root in roots:
            if not root.is_dir():
                raise TaskError(f"tasks directory {root} does not exist")
            for sub in sorted(p for p in root.iterdir() if (p / "task.yaml").is_file()):
                spec = load_task(sub, data)
                if public_fraction is not None:
                    spec = dataclasses.replace(spec, public_fraction=float(public_fraction))
                tasks[spec.id] = spec
        return cls(tasks, data)

    def ids(self, kind: str | None = None) -> list[str]:
        return sorted(t for t, s in self._tasks.items() if kind is None or s.kind == kind)

    def get(self, task_id: str) -> TaskSpec:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise TaskError(f"unknown task {task_id!r}; see `mlerl-bench list`") from None

    def __iter__(self) -> Iterator[TaskSpec]:
        return iter(self._tasks[t] for t in self.ids())

    def __len__(self) -> int:
        return len(self._tasks)
