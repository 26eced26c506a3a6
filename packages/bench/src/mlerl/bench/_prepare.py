"""``prepare``: write a task's ``prepared/public`` and ``prepared/private`` directories.

Stand-in tasks are built from shipped or seeded data; real MLE-bench tasks are split from a
user-supplied Kaggle raw directory (:mod:`mlerl.bench._raw`). Files are written into a
temporary sibling directory and moved into place at the end, so an interrupted prepare never
leaves a half-written task that looks prepared. Answers are written only under ``private/``.
Concurrent prepares of one task (parallel sweep jobs, several ``mlerl train`` at once) take
turns on a lock file beside it: the first builds, the others find it prepared.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mlerl.bench._task import Registry, TaskError, TaskSpec

if TYPE_CHECKING:
    from mlerl.bench._standins import Built


def _write_built(built: Built, task: TaskSpec, root: Path) -> None:
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    private.chmod(0o700)  # answers: unreadable by the sandbox uid even if a path leaked
    files = task.files
    built.train.to_csv(public / files.get("train", "train.csv"), index=False)
    built.test.to_csv(public / files.get("test", "test.csv"), index=False)
    built.sample.to_csv(
        public / files.get("sample_submission", "sample_submission.csv"), index=False
    )
    built.answers.to_csv(private / files.get("answers", "answers.csv"), index=False)
    (public / "description.md").write_text(task.description, encoding="utf-8")
    if built.images:
        from PIL import Image

        images = public / "images"
        images.mkdir()
        for name, arr in built.images.items():
            Image.fromarray(arr, mode="L").save(images / name)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing), released however this ends."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _install(tmp: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(dest)


def _build(task: TaskSpec, tmp: Path, raw_dir: str | Path | None) -> None:
    """Write ``task``'s ``prepared/`` tree under ``tmp``."""
    if task.kind == "standin":
        from mlerl.bench._standins import builder_for  # sklearn loads only when preparing

        found = builder_for(task.id)
        if found is None:
            raise TaskError(f"{task.id} is marked standin but has no builder")
        builder, rows = found
        generator = task.extra.get("generator") or {}  # a variant's generator options
        try:
            built = builder(rows, int(task.extra.get("seed", 0)), **generator)
        except TypeError as exc:
            if not generator:  # a builder's own bug, not the task's options
                raise
            raise TaskError(f"{task.id}: bad extra.generator {generator!r} ({exc})") from None
        _write_built(built, task, tmp)
        (tmp / "prepared" / "standin.json").write_text(task.stamp(), encoding="utf-8")
        return
    if raw_dir is None:
        raise TaskError(f"{task.id} is a Kaggle task: pass --raw DIR with its unzipped files")
    from mlerl.bench._raw import prepare_raw

    prepare_raw(task, Path(raw_dir), tmp / "prepared" / "public", tmp / "prepared" / "private")
    (tmp / "prepared" / "public" / "description.md").write_text(task.description, encoding="utf-8")


def prepare(
    task_id: str,
    data_dir: str | Path | None = None,
    raw_dir: str | Path | None = None,
    tasks_dir: str | Path | None = None,
    force: bool = False,
) -> TaskSpec:
    """Prepare ``task_id`` under ``data_dir`` (default: MLE-bench's cache) and return its spec.

    Stand-ins need no ``raw_dir``; real tasks need the unzipped Kaggle competition files.
    An already prepared task is kept unless ``force``.
    """
    task = Registry.load(tasks_dir=tasks_dir, data_dir=data_dir).get(task_id)
    if task.is_prepared() and not force:
        return task
    task.data_dir.mkdir(parents=True, exist_ok=True)
    with _lock(task.data_dir / f".{task.id}.lock"):
        if task.is_prepared() and not force:  # another process prepared it meanwhile
            return task
        tmp = Path(tempfile.mkdtemp(prefix=f".{task.id}-", dir=task.data_dir))
        try:
            _build(task, tmp, raw_dir)
            _install(tmp, task.data_dir / task.id)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return task
