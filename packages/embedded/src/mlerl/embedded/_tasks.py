"""What the corpus generator needs to know about a task, read from `mlerl.bench` specs.

A `TaskView` is the generator's input: ids, columns, metric family and modality. `task_views()`
builds views from the bench registry (preparing the public data of tasks that are not prepared
yet, which for stand-ins is offline and takes seconds) and reads the train/test files to find
the label and text columns. By default the views cover the `-tiny` stand-ins, the tasks a
default `mlerl train` runs on.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlerl.bench import TaskSpec

# metric name (lower-cased, bench spelling variants) -> how the submission is produced
_PROBLEM_BY_METRIC = {
    "auc": "binary",
    "roc_auc": "binary",
    "roc-auc": "binary",
    "mean_column_auc": "binary",
    "logloss": "proba",
    "log_loss": "proba",
    "multiclass_logloss": "proba",
    "accuracy": "label",
    "qwk": "label",
    "quadratic_weighted_kappa": "label",
    "pearson": "regression",
    "rmse": "regression",
    "rmsle": "regression",
    "mae": "regression",
    "mean_column_rmsle": "regression",
    "r2": "regression",
    "word_jaccard": "span",
}


@dataclass(frozen=True)
class TaskView:
    """A task as the program generator sees it."""

    id: str
    metric: str
    """Metric name, e.g. ``auc``, ``logloss``, ``accuracy``, ``pearson``, ``rmse``."""
    lower_is_better: bool
    modality: str
    """``tabular``, ``text`` or ``image``."""
    id_column: str
    target_columns: tuple[str, ...]
    """Submission columns besides the id."""
    label_column: str
    """The label column of train.csv (for one-column-per-class tasks, the class label)."""
    description: str
    text_column: str | None = None
    image_column: str | None = None
    """For image tasks: the column with the file name under input/images/ (None: `<id>.png`)."""
    context_column: str | None = None
    """For span tasks: a test column besides id and text that conditions the span (sentiment)."""
    task: TaskSpec | None = field(default=None, compare=False, repr=False)
    """The `mlerl.bench.TaskSpec` (prompts are built from it: description, files, snippet)."""

    @property
    def problem(self) -> str:
        """``binary`` (P(positive)), ``proba`` (one column per class), ``label``, ``regression``
        or ``span`` (copy a span of the text, Jaccard)."""
        key = self.metric.lower()
        if key in _PROBLEM_BY_METRIC:
            return _PROBLEM_BY_METRIC[key]
        if "jaccard" in key:
            return "span"
        if "auc" in key:
            return "binary"
        if "loss" in key:
            return "proba"
        if "acc" in key or "kappa" in key:
            return "label"
        return "regression"


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return next(csv.reader(fh), [])


def _mean_lengths(path: Path, rows: int = 20) -> dict[str, float]:
    """Mean string length per column over the first `rows` rows."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        sums: dict[str, float] = {}
        for i, row in enumerate(reader):
            if i >= rows:
                break
            for key, value in row.items():
                sums[key] = sums.get(key, 0.0) + len(value or "")
    return {k: v / max(1, min(rows, i + 1)) for k, v in sums.items()} if sums else {}


def view_from_public_dir(
    task_id: str,
    metric: str,
    lower_is_better: bool,
    modality: str,
    public_dir: Path,
    description: str | None = None,
    id_column: str | None = None,
    task: TaskSpec | None = None,
) -> TaskView:
    """Infer a view from a prepared public dir (train.csv, test.csv, sample_submission.csv)."""
    train_cols = _header(public_dir / "train.csv")
    test_cols = _header(public_dir / "test.csv")
    sub_cols = _header(public_dir / "sample_submission.csv")
    id_col = id_column or sub_cols[0]
    targets = tuple(c for c in sub_cols if c != id_col)
    only_train = [c for c in train_cols if c not in test_cols]
    if not only_train:
        raise ValueError(f"{task_id}: train.csv has no column missing from test.csv")
    label = targets[0] if targets and targets[0] in only_train else only_train[0]
    text_col = image_col = None
    if modality == "text":
        lengths = {c: n for c, n in _mean_lengths(public_dir / "test.csv").items() if c != id_col}
        text_col = max(lengths, key=lengths.__getitem__) if lengths else None
    if modality == "image":
        with (public_dir / "test.csv").open(newline="", encoding="utf-8") as fh:
            row = next(csv.DictReader(fh), {}) or {}
        image_col = next(
            (c for c, v in row.items() if str(v).lower().endswith((".png", ".jpg"))), None
        )
    context_col = None
    if text_col and modality == "text":
        context_col = next((c for c in test_cols if c not in (id_col, text_col)), None)
    if description is None:
        path = public_dir / "description.md"
        description = path.read_text(encoding="utf-8") if path.is_file() else task_id
    return TaskView(
        task_id,
        metric,
        lower_is_better,
        modality,
        id_col,
        targets,
        label,
        description,
        text_col,
        image_col,
        context_col,
        task,
    )


def default_task_ids(data_dir: Path | None = None) -> list[str]:
    """The `-tiny` stand-in tasks of the bench registry, sorted."""
    from mlerl.bench import Registry

    registry = Registry.load(data_dir=data_dir)
    return [t for t in registry.ids(kind="standin") if t.endswith("-tiny")]


def task_views(
    data_dir: Path, task_ids: list[str] | None = None, tasks_dir: Path | None = None
) -> list[TaskView]:
    """Views of `task_ids` (default: `default_task_ids`), preparing their data as needed;
    `tasks_dir` adds task definitions to the built-in ones (`mlerl.bench.Registry`)."""
    from mlerl.bench import Registry, prepare

    registry = Registry.load(tasks_dir=tasks_dir, data_dir=data_dir)
    ids = task_ids if task_ids is not None else default_task_ids(data_dir)
    views = []
    for task_id in ids:
        spec = registry.get(task_id)
        public = Path(spec.public_dir)
        if not spec.is_prepared():
            prepare(task_id, data_dir, tasks_dir=tasks_dir)
        views.append(
            view_from_public_dir(
                task_id,
                str(spec.metric),
                bool(spec.lower_is_better),
                str(spec.modality),
                public,
                description=spec.description,
                id_column=spec.id_column,
                task=spec,
            )
        )
    return views


def _registry_ids(registry) -> list[str]:
    for name in ("ids", "task_ids", "list"):
        attr = getattr(registry, name, None)
        if attr is not None:
            return sorted(attr() if callable(attr) else attr)
    return []
