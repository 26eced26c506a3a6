"""Suite-wide: tests marked ``gpu`` need a CUDA GPU, and the random real-size model they share.

Without CUDA every ``gpu`` test is skipped with the reason below: the one skip the suite allows
(``make test`` deselects them anyway with ``-m "not gpu"``; ``pytest -m gpu`` runs them on a GPU
machine, README "Running at the paper's scale").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NO_CUDA = ("needs a CUDA GPU: torch.cuda.is_available() is False here (no GPU, or the CPU torch "
           "wheel); run `pytest -m gpu` on a GPU machine (README, 'Running at the paper's scale')")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=NO_CUDA))


@pytest.fixture(scope="session")
def random_qwen25_05b() -> Path:
    """Qwen2.5-0.5B's architecture initialised at random (``mlerl.embedded.build_random_model``),
    built once and reused from ``$MLERL_RANDOM_MODELS`` (default ``~/.cache/mlerl/random-models``,
    the cache ``benchmarks/throughput/gpu.py`` uses too)."""
    from mlerl.embedded import build_random_model

    cache = Path(os.environ.get("MLERL_RANDOM_MODELS", "~/.cache/mlerl/random-models")).expanduser()
    return build_random_model("qwen2.5-0.5b", cache / "qwen2.5-0.5b")
