"""Shared fixtures: one tiny random Qwen2 model directory per test session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlerl.actors._testing import build_tiny_model_dir

    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-qwen2"))
