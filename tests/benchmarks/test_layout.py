"""benchmarks/ is sorted by purpose: every script lives in throughput/, experiments/ or tools/,
and each directory's README lists each of its scripts (and names no script it does not hold),
so the READMEs cannot fall behind the scripts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DIRS = ["throughput", "experiments", "tools"]


def readme_scripts(text: str) -> set[str]:
    """The scripts a README's tables list: the `name.py` in the first cell of each row."""
    return set(re.findall(r"^\|\s*`([\w]+\.py)`\s*\|", text, re.M))


def test_readme_scripts_reads_the_first_cell_only():
    text = (
        "| script | does |\n|---|---|\n| `a.py` | uses `b.py` |\n| `_c.py` | shared |\nsee `d.py`\n"
    )
    assert readme_scripts(text) == {"a.py", "_c.py"}


def test_only_shared_helpers_sit_at_the_top():
    loose = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    assert not loose, f"move these into one of {DIRS} (git mv) and list them in its README: {loose}"


@pytest.mark.parametrize("directory", DIRS)
def test_each_readme_lists_exactly_its_scripts(directory):
    here = BENCHMARKS / directory
    scripts = {p.name for p in here.glob("*.py")}
    listed = readme_scripts((here / "README.md").read_text(encoding="utf-8"))
    assert scripts, directory
    assert scripts - listed == set(), (
        f"{directory}/README.md does not list {sorted(scripts - listed)}"
    )
    assert listed - scripts == set(), (
        f"{directory}/README.md lists missing scripts {sorted(listed - scripts)}"
    )


def test_the_top_readme_names_each_directory():
    text = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    assert all(f"`{d}/`" in text for d in DIRS)


SCRIPTS = sorted(
    str(p.relative_to(BENCHMARKS)) for d in DIRS for p in (BENCHMARKS / d).glob("[a-z]*.py")
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_starts_from_its_directory(script):
    """Each script finds what it imports (the shared _common.py one level up, its neighbours)
    when run as the READMEs say: `python benchmarks/<dir>/<script>.py`, from the repository root."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()
