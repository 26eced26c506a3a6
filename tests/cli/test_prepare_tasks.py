"""`mlerl train` prepares its tasks before anything else runs: missing ones, and stand-ins built
from another data version (a cache from an older mlerl must not be trained on)."""

import pytest

from mlerl.bench import prepare
from mlerl.cli._config import TrainConfig
from mlerl.cli._progress import Progress
from mlerl.cli._train import _prepare_tasks
from mlerl.protocol import ConfigError

TASK = "standin-materials-rmsle-tiny"


def _train(data_dir, prepare_missing=True):
    train = TrainConfig()
    train.tasks.ids = [TASK]
    train.tasks.data_dir = str(data_dir)
    train.tasks.prepare = prepare_missing
    return train


def test_a_stand_in_prepared_from_another_data_version_is_prepared_again(tmp_path):
    task = prepare(TASK, tmp_path / "data")
    fresh = task.answers_path.read_bytes()
    task.stamp_path.write_text('{"data_version": 1, "seed": 0}', encoding="utf-8")
    task.answers_path.write_text("id,formation_energy_ev_natom,bandgap_energy_ev\n1,0,0\n")
    _prepare_tasks(_train(tmp_path / "data"), Progress(tmp_path, enabled=False))
    assert task.is_prepared()
    assert task.answers_path.read_bytes() == fresh  # the old rows are gone


def test_without_tasks_prepare_a_stale_stand_in_is_a_config_error(tmp_path):
    task = prepare(TASK, tmp_path / "data")
    task.stamp_path.write_text('{"data_version": 1, "seed": 0}', encoding="utf-8")
    with pytest.raises(ConfigError, match="another data version"):
        _prepare_tasks(_train(tmp_path / "data", False), Progress(tmp_path, enabled=False))
    with pytest.raises(ConfigError, match="is not prepared"):
        _prepare_tasks(_train(tmp_path / "empty", False), Progress(tmp_path, enabled=False))
