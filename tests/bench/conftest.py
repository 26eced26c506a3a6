"""Shared fixtures: a registry over a temporary data dir, helpers to install answers."""

from pathlib import Path

import pandas as pd
import pytest

from mlerl.bench import Registry, grade_submission


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry.load(data_dir=tmp_path / "data")


class Grading:
    """Install synthetic answers for a real task and grade submission frames against them."""

    def __init__(self, registry: Registry, tmp: Path) -> None:
        self.registry, self.tmp = registry, tmp

    def answers(self, task_id: str, frame: pd.DataFrame) -> None:
        task = self.registry.get(task_id)
        task.private_dir.mkdir(parents=True, exist_ok=True)
        task.public_dir.mkdir(parents=True, exist_ok=True)
        frame.to_csv(task.answers_path, index=False)

    def grade(self, task_id: str, sub: pd.DataFrame | str):
        path = self.tmp / f"sub-{task_id}.csv"
        if isinstance(sub, str):
            path.write_text(sub, encoding="utf-8")
        else:
            sub.to_csv(path, index=False)
        return grade_submission(self.registry.get(task_id), path)


@pytest.fixture
def grading(registry: Registry, tmp_path: Path) -> Grading:
    return Grading(registry, tmp_path)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One data dir shared by the stand-in tests; tasks are prepared on first use."""
    return tmp_path_factory.mktemp("standins")
