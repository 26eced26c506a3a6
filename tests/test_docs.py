"""The README stays a user's guide (at most 12,000 bytes), and the README, the reference docs
(docs/*.md), the package READMEs and the code say what they mean without pointing at an issue
tracker, a commit or a date a reader cannot follow. The studies keep theirs: docs/experiments/
and the results files in benchmarks/results/ are logs of their dates.

What counts, file by file:
- an issue number (``issue 40``, ``issues 24 and 28``, ``PR 7``) anywhere in the text;
- in prose only, a ``#12``-style reference, a date (``2026-11-30``) or a commit id (7 to 40
  hex digits with at least one letter and one digit). Prose is Markdown outside fenced code
  and inline code, Python comments and docstrings, and ``#`` comments of other files; code
  and data (a test's sha256, a task's CSV ids in a fence) are not prose.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_BYTES = 12_000

ISSUE = re.compile(r"\b(?:issues?|PRs?|pull requests?)\s*#?\d+", re.IGNORECASE)
GH_REF = re.compile(r"(?<![\w&#/])#\d{1,5}\b")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMIT = re.compile(
    r"(?<![\w/.#:=+-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w/+-]|\.\w)"
)
PROSE_PATTERNS = {"reference": GH_REF, "date": DATE, "commit id": COMMIT}

SCANNED_DIRS = ("docs", "packages", "src", "tests", "benchmarks", "scripts", ".ci", "docker")
SCANNED_FILES = ("README.md", "Makefile", "pyproject.toml")
# Logs of their dates, and this file's own examples.
EXEMPT = ("docs/experiments/", "benchmarks/results/", "tests/test_docs.py")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".cfg", ".ini", ".txt", ".json"}


def scanned_files() -> list[str]:
    """Tracked and new (not ignored) text files this check covers, relative to the root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    chosen = []
    for name in listed:
        path = ROOT / name
        if not path.is_file() or name.startswith(EXEMPT):
            continue
        if name.startswith("docs/") and "/" in name[len("docs/") :]:
            continue  # docs/*.md only; docs/experiments/ is exempt above
        top = name.split("/", 1)[0]
        if name in SCANNED_FILES or (
            top in SCANNED_DIRS
            and (path.suffix in TEXT_SUFFIXES or path.name in ("Makefile", "Dockerfile", "run"))
        ):
            chosen.append(name)
    return chosen


def markdown_prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks, inline code removed."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "", line)))
    return lines


def python_prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every comment and every line of every docstring."""
    lines = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                value = body[0].value
                if isinstance(value.value, str):
                    for offset, line in enumerate(value.value.splitlines()):
                        lines.append((value.lineno + offset, line))
    return lines


def hash_comment_prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of ``#`` comments (a ``#`` at the start or after a blank)."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        match = re.search(r"(?:^|\s)#(.*)$", line)
        if match:
            lines.append((number, match.group(1)))
    return lines


def prose(name: str, text: str) -> list[tuple[int, str]]:
    if name.endswith(".md"):
        return markdown_prose(text)
    if name.endswith(".py"):
        return python_prose(text)
    if name.endswith((".json", ".txt")):
        return []
    return hash_comment_prose(text)


def offences(name: str, text: str) -> list[str]:
    """``file:line: what`` for every issue number in the text and every reference, date or
    commit id in its prose."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ISSUE.finditer(line):
            found.append(f"{name}:{number}: issue number {match.group(0)!r}")
    for number, line in prose(name, text):
        for what, pattern in PROSE_PATTERNS.items():
            for match in pattern.finditer(line):
                found.append(f"{name}:{number}: {what} {match.group(0)!r}")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


def test_offences_finds_each_kind_with_its_line():
    text = (
        "# Title\n\nSee issue 40 and issues 24 and 28.\nFixed in #12, measured 2026-11-30 at "
        "commit 57b55e2.\n```\nrun 2026-11-30 57b55e2 #3\n```\nnot `57b55e2` in code\n"
    )
    assert offences("x.md", text) == [
        "x.md:3: issue number 'issue 40'",
        "x.md:3: issue number 'issues 24'",
        "x.md:4: commit id '57b55e2'",
        "x.md:4: date '2026-11-30'",
        "x.md:4: reference '#12'",
    ]


def test_offences_reads_python_comments_and_docstrings_not_code():
    text = (
        '"""Module (see 2026-11-30)."""\n'
        "X = 'sha 0123456789abcdef 2026-11-25'  # measured at 82919cd\n"
        "def f():\n"
        '    """Line one.\n\n    Fixed by PR 7."""\n'
        "    return '#1'\n"
    )
    assert offences("m.py", text) == [
        "m.py:1: date '2026-11-30'",
        "m.py:2: commit id '82919cd'",
        "m.py:6: issue number 'PR 7'",
    ]


def test_offences_ignores_what_is_not_a_reference():
    text = (
        "Seed 3, exit 1, runs/<date>/, 1e6, deadbeef, 0123456, sha256:"
        "ab12cd34ef56, a1b2c3d.json, v0.31.0, colour #fff, [x](#part-2)\n"
    )
    assert offences("x.md", text) == []
    assert offences("c.yaml", "key: 2026-11-30  # a comment\n") == []
    assert offences("c.yaml", "key: 1  # since 2026-11-30\n") == ["c.yaml:1: date '2026-11-30'"]


def test_readme_is_at_most_12_kb():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes (at most {README_MAX_BYTES}): it is a user's guide; move "
        "measured figures to a docs/experiments page and link it"
    )


def test_the_scan_covers_the_readme_the_reference_docs_and_the_code():
    files = set(scanned_files())
    assert {"README.md", "Makefile", "docs/testing.md", "src/mlerl/cli/_train.py"} <= files
    assert not any(f.startswith(("docs/experiments/", "benchmarks/results/")) for f in files)


def test_no_issue_numbers_dates_or_commit_ids():
    found = []
    for name in scanned_files():
        found += offences(name, (ROOT / name).read_text(encoding="utf-8"))
    assert found == [], (
        "say what the reference meant (the fact, or a link to the docs/experiments page with the "
        "study):\n" + "\n".join(found)
    )
