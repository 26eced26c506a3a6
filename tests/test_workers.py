"""`make test`'s two pytest-xdist workers: how tests/conftest.py cuts the suite into units."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _suite_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Config:
    """What xdist's scheduler reads of the config: the --dist mode and the workers."""

    def __init__(self, dist: str) -> None:
        self.values = {"dist": dist, "tx": ["2*popen"]}

    def getvalue(self, name: str) -> object:
        return self.values[name]


def test_a_module_is_one_unit_and_the_system_modules_are_one_together():
    suite = _suite_conftest()
    scheduler = suite.pytest_xdist_make_scheduler(_Config("loadfile"), None)
    unit = scheduler._split_scope
    assert unit("tests/protocol/test_metrics.py::test_a") == unit(
        "tests/protocol/test_metrics.py::test_b[x-1]"
    )
    assert unit("tests/protocol/test_metrics.py::test_a") != unit("tests/protocol/test_wire.py::a")
    system = {unit(f"{path}::test_x") for path in suite.SYSTEM_MODULES}
    assert system == {"system"}
    # the Slurm cluster's module runs beside them (it mostly waits on Slurm)
    assert unit("tests/cli/test_slurm_cluster.py::test_x") == "tests/cli/test_slurm_cluster.py"


def test_every_system_module_exists():
    # a module renamed or moved would silently leave the unit and run beside the others
    missing = [p for p in _suite_conftest().SYSTEM_MODULES if not (ROOT / p).is_file()]
    assert missing == []


def test_other_distribution_modes_keep_xdist_own_scheduler():
    suite = _suite_conftest()
    assert suite.pytest_xdist_make_scheduler(_Config("load"), None) is None
    assert suite.pytest_xdist_make_scheduler(_Config("no"), None) is None
