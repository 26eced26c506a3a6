"""The package boundaries: each package imports only the mlerl packages its pyproject depends on,
the packages form no cycle, and no package has an import cycle among its own modules (lazy,
function-level imports included: a cycle hidden inside a function is still a cycle)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def _imports(source_dir: Path) -> dict[str, set[str]]:
    """module -> the mlerl modules it imports (every `from mlerl.x import ...` and `import mlerl.x`)."""
    graph = {}
    for path in source_dir.rglob("*.py"):
        rel = path.relative_to(source_dir.parent.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("mlerl.")
            ):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("mlerl."))
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep in graph and dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_has_no_import_cycle_among_its_modules(package):
    graph = _imports(ROOT / "packages" / package / "src" / "mlerl" / package)
    own = {
        m: {d for d in deps if d.startswith(f"mlerl.{package}.")}
        for m, deps in graph.items()
        if m != f"mlerl.{package}"
    }
    assert _cycle(own) is None, _cycle(own)


def test_packages_import_only_what_they_depend_on_and_form_no_cycle():
    declared, used = {}, {}
    for package in PACKAGES:
        meta = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())
        declared[package] = {
            d.split("[")[0].removeprefix("mlerl-")
            for d in meta["project"]["dependencies"]
            if d.startswith("mlerl-")
        }
        graph = _imports(ROOT / "packages" / package / "src" / "mlerl" / package)
        used[package] = {d.split(".")[1] for deps in graph.values() for d in deps} - {package}
        assert used[package] <= declared[package], (package, used[package] - declared[package])
    assert _cycle(declared) is None, _cycle(declared)
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {d.split("[")[0] for d in root if d.startswith("mlerl-")} == {
        f"mlerl-{p}" for p in PACKAGES
    }
