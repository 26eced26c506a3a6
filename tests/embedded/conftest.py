"""Shared fixtures: prepared -tiny stand-in tasks (offline, seconds) and their views."""

from __future__ import annotations

import pytest

from mlerl.embedded import default_task_ids, task_views

# A small corpus over every tiny task keeps corpus tests fast but still covers each modality.
SMALL = dict(drafts_per_task=12, improves_per_task=4, instruments_per_task=3)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tasks")


@pytest.fixture(scope="session")
def views(data_dir):
    return task_views(data_dir, default_task_ids(data_dir))


@pytest.fixture(scope="session")
def registry(data_dir, views):
    from mlerl.bench import Registry

    return Registry.load(data_dir=data_dir)
