"""``BenchConfig``: which tasks a run uses and how submissions are graded."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlerl.bench._paper import TASKS
from mlerl.bench._task import Registry, TaskSpec
from mlerl.protocol import check


@dataclass
class BenchConfig:
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    """Task ids (the paper's 12 by default; offline runs use stand-ins, see `mlerl-bench list`)."""
    data_dir: str = ""
    """Prepared data root; "" means MLE-bench's cache, ~/.cache/mle-bench/data."""
    tasks_dir: str = ""
    """Extra task directories (task.yaml + description.md); "" for the built-in tasks only."""
    grade_timeout_s: float = 120.0
    """Wall-clock limit of one grading subprocess."""
    grade_memory_mb: int = 4096
    """Address-space limit of one grading subprocess."""
    prepare_missing: bool = True
    """Prepare stand-in tasks that are not prepared yet (real tasks need `prepare --raw`)."""

    def __post_init__(self) -> None:
        check(len(self.tasks) > 0, "tasks", "needs at least one task id")
        check(len(set(self.tasks)) == len(self.tasks), "tasks", "task ids must be unique")
        check(self.grade_timeout_s > 0, "grade_timeout_s", "must be > 0")
        check(self.grade_memory_mb >= 256, "grade_memory_mb", "must be >= 256")


def load_tasks(cfg: BenchConfig) -> list[TaskSpec]:
    """The configured tasks, prepared (stand-ins are prepared on demand when allowed).

    Raises :class:`mlerl.bench.TaskError` for an unknown id or an unprepared real task.
    """
    from mlerl.bench._prepare import prepare
    from mlerl.bench._task import TaskError

    reg = Registry.load(cfg.tasks_dir or None, cfg.data_dir or None)
    out = []
    for task_id in cfg.tasks:
        task = reg.get(task_id)
        if not task.is_prepared():
            if task.kind == "standin" and cfg.prepare_missing:
                task = prepare(task_id, reg.data_dir, tasks_dir=cfg.tasks_dir or None)
            else:
                raise TaskError(f"{task_id} is not prepared under {reg.data_dir}: run "
                                f"`mlerl-bench prepare {task_id}`" + (" --raw DIR" if task.kind != "standin" else ""))
        out.append(task)
    return out
