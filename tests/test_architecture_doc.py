"""docs/architecture.md states the package facts the code holds, so the page cannot drift.

The page's package table (distribution, mlerl dependencies, torch, number of public names) is
compared with each package's pyproject and with what its modules import; each package's
"Public names:" list with its `__all__`; and the one stated exception to "packages import only
each other's public names" (the CLI forwarding to the packages' console scripts) with the
code. Reading is by static parsing (ast, tomllib), so the check needs no package installed.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def source_dir(package: str) -> Path:
    if package == "cli":
        return ROOT / "src" / "mlerl" / "cli"
    return ROOT / "packages" / package / "src" / "mlerl" / package


def declared_all(package: str) -> list[str]:
    """The literal `__all__` of the package's `__init__.py`."""
    tree = ast.parse((source_dir(package) / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"mlerl.{package} has no literal __all__ in its __init__.py")


def project(package: str) -> dict:
    return tomllib.loads(
        (ROOT / "packages" / package / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]


def requirement_names(project_table: dict) -> set[str]:
    return {
        re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0].lower()
        for dep in project_table.get("dependencies", [])
    }


def mlerl_references(package: str) -> set[str]:
    """Every `mlerl.<other package>...` module this package names: imports at any level, and
    string constants naming a module (`"mlerl.x._y:main"`: dispatch tables, lazy imports)."""
    known = set(PACKAGES) | {"cli"}
    found = set()
    for path in source_dir(package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [
                    f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")
                ]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"mlerl(\.\w+)+(:\w+)?", node.value):
                    names = [node.value.split(":")[0]]
            for name in names:
                parts = name.split(".")
                if (
                    parts[0] == "mlerl"
                    and len(parts) > 1
                    and parts[1] in known
                    and parts[1] != package
                ):
                    found.add(name)
    return found


# ---- reading the page --------------------------------------------------------------------------


def package_table(text: str) -> dict[str, dict[str, str]]:
    """The rows of the table whose header starts `| package | distribution |`, by package."""
    lines = text.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if re.match(r"\|\s*package\s*\|\s*distribution\s*\|", line)
        ),
        None,
    )
    assert start is not None, "docs/architecture.md: no `| package | distribution | ...` table"
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = dict(
            zip(header, (c.strip().strip("`") for c in line.strip().strip("|").split("|")))
        )
        rows[cells["package"]] = cells
    return rows


def public_names(text: str) -> dict[str, list[str]]:
    """Per `### `mlerl.<name>`` section: the backticked names in the bullet list that follows
    its `Public names:` line (up to the first line that is not a bullet)."""
    found = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        title = re.match(r"`mlerl\.(\w+)`", section)
        if not title:
            continue
        lines = section.splitlines()
        start = next((i for i, line in enumerate(lines) if line.strip() == "Public names:"), None)
        assert start is not None, (
            f"docs/architecture.md: section mlerl.{title.group(1)} has no 'Public names:' list"
        )
        names = []
        for line in lines[start + 1 :]:
            if not line.startswith("- "):
                break
            names += re.findall(r"`([A-Za-z_]\w*)`", line)
        found[title.group(1)] = names
    return found


def dependency_cell(cell: str) -> set[str]:
    return set() if cell.strip() in {"none", "-", ""} else {d.strip() for d in cell.split(",")}


# ---- the reading functions, on hand-made text --------------------------------------------------

SAMPLE = """
| package | distribution | depends on | torch | public names |
|---|---|---|---|---|
| `a` | `mlerl-a` | none | no | 2 |
| `b` | `mlerl-b` | a, c | yes | 1 |

### `mlerl.a`

Prose with `not_a_name` outside the list.

Public names:
- group: `x`, `Y`
- other: `z` (plain words)
Then `w` is prose again.
"""


def test_the_readers_take_only_the_table_and_the_lists():
    table = package_table(SAMPLE)
    assert table["b"] == {
        "package": "b",
        "distribution": "mlerl-b",
        "depends on": "a, c",
        "torch": "yes",
        "public names": "1",
    }
    assert dependency_cell(table["a"]["depends on"]) == set() and dependency_cell("a, c") == {
        "a",
        "c",
    }
    assert public_names(SAMPLE) == {"a": ["x", "Y", "z"]}


def test_a_section_without_its_list_is_reported():
    with pytest.raises(AssertionError, match="mlerl.q"):
        public_names("### `mlerl.q`\n\nno list here\n")


# ---- the page against the code ----------------------------------------------------------------

TEXT = DOC.read_text(encoding="utf-8")


def test_the_table_has_one_row_per_package():
    assert sorted(package_table(TEXT)) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_each_row_matches_the_pyproject_and_the_imports(package):
    row = package_table(TEXT)[package]
    meta = project(package)
    assert row["distribution"] == meta["name"], (package, row["distribution"], meta["name"])
    declared = {d.removeprefix("mlerl-") for d in requirement_names(meta) if d.startswith("mlerl-")}
    stated = dependency_cell(row["depends on"])
    assert stated == declared, (
        f"{package}: the page says {sorted(stated)}, the pyproject {sorted(declared)}"
    )
    imported = {name.split(".")[1] for name in mlerl_references(package)}
    assert imported == declared, (
        f"{package}: declared {sorted(declared)}, imported {sorted(imported)}"
    )
    assert row["torch"] == ("yes" if "torch" in requirement_names(meta) else "no"), package
    assert int(row["public names"]) == len(declared_all(package)), (package, row["public names"])


@pytest.mark.parametrize("package", [*PACKAGES, "cli"])
def test_each_public_names_list_is_the_packages_all(package):
    listed = public_names(TEXT).get(package)
    assert listed is not None, f"docs/architecture.md has no section `mlerl.{package}`"
    exported = declared_all(package) if package != "cli" else cli_public_names()
    assert len(listed) == len(set(listed)), (
        f"{package}: listed twice: {sorted({n for n in listed if listed.count(n) > 1})}"
    )
    assert set(listed) - set(exported) == set(), (
        f"{package}: the page lists names it does not export"
    )
    assert set(exported) - set(listed) == set(), f"{package}: exported but not on the page"


def cli_public_names() -> list[str]:
    """`mlerl.cli`'s names for scripts: what its `__init__` binds at top level without a
    leading underscore, less the command's own `main` and `__version__`."""
    tree = ast.parse((source_dir("cli") / "__init__.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mlerl."):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return sorted(n for n in names if not n.startswith("_") and n != "main")


def test_the_root_distribution_depends_on_every_package():
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert root["name"] == "mlerl"
    assert {d for d in requirement_names(root) if d.startswith("mlerl-")} == {
        project(p)["name"] for p in PACKAGES
    }


@pytest.mark.parametrize("package", [*PACKAGES, "cli"])
def test_private_modules_of_another_package_are_only_its_console_scripts(package):
    """The page's one exception: `mlerl sandbox|instrument|tasks` run the packages' own
    `[project.scripts]` targets. Any other private name of another package is drift."""
    scripts = {
        target.split(":")[0] for p in PACKAGES for target in project(p).get("scripts", {}).values()
    }
    private = {
        name
        for name in mlerl_references(package)
        if any(part.startswith("_") for part in name.split(".")[2:])
    }
    allowed = scripts if package == "cli" else set()
    assert private - allowed == set(), (
        f"{package} names private modules of other packages: {sorted(private - allowed)}"
    )
