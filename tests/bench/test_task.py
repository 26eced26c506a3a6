"""Task specs and the registry: shipped tasks parse, --tasks-dir adds/overrides, errors are clear."""

from pathlib import Path

import pytest
import yaml

from mlerl.bench import GRADERS, Registry, TaskError, default_data_dir
from mlerl.bench._paper import TASKS


def test_every_shipped_task_is_complete(tmp_path):
    reg = Registry.load(data_dir=tmp_path)
    assert set(TASKS) <= set(reg.ids("mlebench"))
    standins = reg.ids("standin")
    assert len(standins) >= 16 and all(
        f"{t}-tiny" in standins for t in standins if not t.endswith("-tiny")
    )
    for task in reg:
        assert task.grader in GRADERS, task.id
        assert task.thresholds is not None and task.thresholds.source, task.id
        assert "./submission.csv" in task.description, task.id
        assert task.public_dir == tmp_path / task.id / "prepared" / "public"
    modalities = {reg.get(t).modality for t in standins}
    metrics = {reg.get(t).metric for t in standins}
    assert modalities == {"tabular", "text", "image"}
    assert {
        "roc_auc",
        "accuracy",
        "quadratic_weighted_kappa",
        "pearson",
        "word_jaccard",
        "multiclass_log_loss",
        "columnwise_rmsle",
        "columnwise_roc_auc",
    } <= metrics


def _write_task(root: Path, **over) -> Path:
    spec = {
        "id": "my-task",
        "grader": "auc",
        "metric": "roc_auc",
        "direction": "maximize",
        "modality": "tabular",
        "id_column": "id",
        "target_columns": ["y"],
        "thresholds": {"gold": 0.9, "silver": 0.8, "bronze": 0.7, "median": 0.6, "source": "test"},
    }
    spec.update(over)
    d = root / spec["id"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.yaml").write_text(yaml.safe_dump(spec))
    (d / "description.md").write_text("Write ./submission.csv")
    return d


def test_tasks_dir_adds_and_overrides(tmp_path):
    _write_task(tmp_path / "tasks")
    _write_task(
        tmp_path / "tasks", id="leaf-classification", grader="log_loss_exact", direction="minimize"
    )
    reg = Registry.load(tasks_dir=tmp_path / "tasks", data_dir=tmp_path / "d")
    assert reg.get("my-task").target_columns == ("y",) and reg.get("my-task").thresholds.gold == 0.9
    assert reg.get("leaf-classification").task_dir == tmp_path / "tasks" / "leaf-classification"


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"direction": "up"}, "direction"),
        ({"modality": "audio"}, "modality"),
        ({"thresholds": {"gold": 1}}, "thresholds"),
        ({"id_column": None}, None),
    ],
)
def test_malformed_task_yaml(tmp_path, over, match):
    spec_over = {k: v for k, v in over.items() if v is not None}
    d = _write_task(tmp_path / "tasks", **spec_over)
    if "id_column" in over:
        raw = yaml.safe_load((d / "task.yaml").read_text())
        del raw["id_column"]
        (d / "task.yaml").write_text(yaml.safe_dump(raw))
        match = "id_column"
    with pytest.raises(TaskError, match=match):
        Registry.load(tasks_dir=tmp_path / "tasks", data_dir=tmp_path)


def test_unknown_task_and_missing_tasks_dir(tmp_path):
    with pytest.raises(TaskError, match="unknown task"):
        Registry.load(data_dir=tmp_path).get("nope")
    with pytest.raises(TaskError, match="does not exist"):
        Registry.load(tasks_dir=tmp_path / "absent", data_dir=tmp_path)


def test_default_data_dir_is_mlebench_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / "mle-bench" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_data_dir() == Path.home() / ".cache" / "mle-bench" / "data"


def test_shipped_standin_files_match_generators_and_leaderboards(tmp_path):
    """Guards drift: editing a generator without `mlerl-bench calibrate` fails here."""
    from mlerl.bench._medals import thresholds_from_leaderboard
    from mlerl.bench._task import BUILTIN_TASKS_DIR
    from mlerl.bench._taskdefs import write_standin_dirs

    ids = ["standin-tweets-jaccard-tiny", "standin-digits-colauc-tiny", "standin-essays-qwk-tiny"]
    write_standin_dirs({}, root=tmp_path, only=ids)
    for task_id in ids:
        shipped = (BUILTIN_TASKS_DIR / task_id / "description.md").read_text()
        assert (tmp_path / task_id / "description.md").read_text() == shipped, task_id
    for task in Registry.load(data_dir=tmp_path):
        if task.kind == "standin":
            g, s, b, med, lower = thresholds_from_leaderboard(task.leaderboard)
            t = task.thresholds
            assert (t.gold, t.silver, t.bronze, t.median) == (
                g,
                s,
                b,
                med,
            ) and lower == task.lower_is_better
