"""The lock file (requirements/lock.txt, scripts/lock.py): what the check refuses, by hand, and
the real lock against the pyprojects and this venv."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("mlerl_lock_script", ROOT / "scripts" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lock = _load()


def _reqs(*lines: str) -> list[Requirement]:
    return [Requirement(line) for line in lines]


# a workspace needing a>=1 and b[x]; a needs c; b's extra x needs d; d is on Windows only for e
REQUIRES = {
    "a": _reqs("c<3"),
    "b": _reqs("d; extra == 'x'", "f; extra == 'y'"),
    "c": [],
    "d": _reqs("e; sys_platform == 'win32'"),
    "e": [],
    "f": [],
}
ROOTS = {"mlerl": _reqs("a>=1", "b[x]")}


def test_a_closed_lock_that_satisfies_every_requirement_is_in_sync():
    pins = lock.Lock({"a": "1.2", "b": "2.0", "c": "2.9", "d": "0.1", "pip": "26.3"})
    assert lock.problems(pins, REQUIRES, ROOTS) == []
    installed = {"a": "1.2", "b": "2.0", "c": "2.9", "d": "0.1", "pip": "26.3", "extra-tool": "9"}
    assert lock.problems(pins, REQUIRES, ROOTS, installed) == []  # more installed is fine


def test_every_way_out_of_sync_is_named():
    pins = lock.Lock({"a": "0.9", "b": "2.0", "c": "3.0", "f": "1.0", "pip": "26.3"})
    found = lock.problems(
        pins, REQUIRES, ROOTS, {"a": "0.9", "b": "2.1", "c": "3.0", "pip": "26.3"}
    )
    assert found == [
        'b requires d; extra == "x", which the lock does not hold',
        "the workspace requires a>=1, but the lock pins a==0.9",
        "a requires c<3, but the lock pins c==3.0",
        "the lock pins f==1.0, which nothing requires",  # b's extra y is not installed
        "the venv holds b 2.1, the lock 2.0",
        "the lock pins f==1.0, which the venv lacks",
    ]


def test_a_local_build_satisfies_its_public_pin():
    pins = lock.Lock({"torch": "2.13.0"})
    assert (
        lock.problems(pins, {"torch": []}, {"m": _reqs("torch>=2.6")}, {"torch": "2.13.0+cpu"})
        == []
    )


def test_only_prereleases_nobody_pins_exactly_are_unwanted():
    pins = {
        "hydra-core": "1.4.0rc3",
        "otel-sdk": "1.45.2",
        "otel-semconv": "0.66b2",
        "numpy": "2.4.6",
    }
    requires = {
        "launcher": _reqs("hydra-core>=1.1.0.dev7"),
        "otel-sdk": _reqs("otel-semconv==0.66b2"),
    }
    assert lock.unwanted_prereleases(pins, requires) == {"hydra-core": "1.4.0rc3"}


def test_changes_lists_old_and_new_versions():
    old, new = (
        lock.Lock({"a": "1", "b": "2", "gone": "3"}),
        lock.Lock({"a": "1", "b": "2.1", "new": "4"}),
    )
    assert lock.changes(old, new) == [
        "  b: 2 -> 2.1",
        "  gone: 3 -> (removed)",
        "  new: (new) -> 4",
    ]


def test_lock_file_lines_are_checked(tmp_path):
    path = tmp_path / "lock.txt"
    path.write_text("# comment\nNumPy==2.4.6  # why\n\nscikit_learn==1.9.1\n")
    assert lock.Lock.read(path).pins == {"numpy": "2.4.6", "scikit-learn": "1.9.1"}
    path.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="expected 'name==version'"):
        lock.Lock.read(path)
    path.write_text("numpy==2\nNumPy==3\n")
    with pytest.raises(ValueError, match="pinned twice"):
        lock.Lock.read(path)


def test_the_makefile_names_every_workspace_package_and_its_extras():
    roots = lock.install_roots()
    assert set(roots) == set(lock.workspace())
    assert roots["mlerl-protocol"] == {"wandb", "console"}
    assert roots["mlerl"] == {"dev", "bench", "slurm"}


def test_the_lock_is_in_sync_with_the_pyprojects_and_this_venv():
    """What `make test` checks first: fails after a pyproject change until `make lock`."""
    assert lock.check() == []
    assert "torch" in lock.Lock.read().pins and "scikit-learn" in lock.Lock.read().pins


def test_the_vllm_lock_holds_what_setup_vllm_installs():
    """.venv-vllm's lock (vLLM pins its own torch and transformers): the locked vLLM build and
    every requirement setup_vllm.sh lists, each pinned once."""
    import re

    script = (ROOT / "scripts" / "ci" / "setup_vllm.sh").read_text()
    spec = re.search(r"^LOCKED_SPEC=(\S+)==(\S+)$", script, re.M)
    reqs = re.search(r"^REQS=\(([^)]*)\)", script, re.M).group(1).split()
    pins = lock.Lock.read(ROOT / "requirements" / "vllm-lock.txt").pins
    assert pins[spec.group(1)] == spec.group(2)
    assert {lock.canonicalize_name(r) for r in reqs} <= set(pins)
    assert "torch" in pins and "transformers" in pins and "pip" in pins
