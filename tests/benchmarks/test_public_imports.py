"""Benchmarks use the packages' public APIs: no script in benchmarks/ imports a private
``mlerl.<package>._module`` (or a ``_name`` from a package), so a package may reorganise its
private modules without breaking a benchmark. What a benchmark needs is exported by the
package's ``__init__`` (see docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def private_imports(source: str) -> list[str]:
    """``mlerl`` imports in ``source`` that reach a private module or name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            found += [m for m in modules if m.startswith("mlerl.") and _private(m)]
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("mlerl.")
            and node.level == 0
        ):
            if _private(node.module):
                found.append(node.module)
            else:
                found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def test_no_benchmark_imports_a_private_module():
    offenders = {
        str(path.relative_to(REPO)): found
        for path in sorted((REPO / "benchmarks").rglob("*.py"))
        if (found := private_imports(path.read_text()))
    }
    assert not offenders, f"export what these need from the package's __init__: {offenders}"


def test_the_check_sees_each_spelling():
    source = (
        "from mlerl.learner._buffer import read_journal\nimport mlerl.sandbox._cgroup\n"
        "from mlerl.sandbox import _cgroup\ndef f():\n    from mlerl.actors._testing import x\n"
        "from mlerl.learner import read_journal\nfrom _common import RESULTS\n"
    )
    assert private_imports(source) == [
        "mlerl.learner._buffer",
        "mlerl.sandbox._cgroup",
        "mlerl.sandbox._cgroup",
        "mlerl.actors._testing",
    ]
