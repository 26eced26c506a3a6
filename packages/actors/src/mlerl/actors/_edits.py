"""Search/replace edits: how an IMPROVE answer may revise its parent program. Pure, total.

A code-editing answer names lines of the previous program and what replaces them, instead of
writing the whole program again (the ``edit`` improve format of :class:`PromptConfig`)::

    <<<<<<< SEARCH
    lines copied from the previous solution
    =======
    the lines that replace them (may be none: a deletion)
    >>>>>>> REPLACE

:func:`parse_edits` reads the blocks, :func:`apply_edits` applies them to the parent (each
search must match exactly once; a search found nowhere may still name one place, see
:func:`apply_edits`), and :func:`make_edits` writes the edits that turn one program
into another (the embedded bootstrap's revision examples); ``apply_edits(a, make_edits(a, b))
== b`` for any two programs.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"


class EditError(ValueError):
    """A search/replace block that is malformed or does not apply to the parent."""


def is_edit(body: str) -> bool:
    """Whether a code block holds search/replace edits rather than a whole program."""
    return any(line.strip() == SEARCH for line in body.splitlines())


Edit = tuple[list[str], list[str]]
"""(search lines, replace lines)."""


def parse_edits(body: str) -> list[Edit]:
    """The edits of ``body`` in order (one or more; nothing but blank lines between them)."""
    edits: list[tuple[list[str], list[str]]] = []
    state, search, replace = "out", list[str](), list[str]()
    for n, line in enumerate(body.splitlines(), 1):
        mark = line.strip()
        if state == "out":
            if mark == SEARCH:
                state, search, replace = "search", [], []
            elif mark:
                raise EditError(
                    f"line {n}: text outside an edit (each edit starts with {SEARCH!r})"
                )
        elif state == "search":
            if mark == DIVIDER:
                state = "replace"
            elif mark in (SEARCH, REPLACE):
                raise EditError(f"line {n}: {mark!r} before {DIVIDER!r}")
            else:
                search.append(line)
        elif mark == REPLACE:
            edits.append((search, replace))
            state = "out"
        elif mark in (SEARCH, DIVIDER):
            raise EditError(f"line {n}: {mark!r} before {REPLACE!r}")
        else:
            replace.append(line)
    if state != "out":
        raise EditError(f"an edit is never closed with {REPLACE!r}")
    if not edits:
        raise EditError("no edit")
    return edits


_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*=(?!=)")
_IMPORT = re.compile(r"^(import\s+\w|from\s+[\w.]+\s+import\s)")


def _anchor(
    lines: list[str], want: list[str], replace: list[str]
) -> tuple[int, int, list[str]] | None:
    """Where a search that is not in the program verbatim still names its place unambiguously:
    (start, end, replacement) or None.

    - one assignment line (``    model = Ridge(alpha=1.0)``): the program's only line that
      assigns the same target at the same indentation (``    model = ...``), when the
      replacement assigns that target too (a replacement that assigns another name would
      silently delete the line it lands on: the program then dies on the name it lost);
    - import lines only, replaced by import lines only: the new imports go after the program's
      last top-level import (an import the program lacks is nothing to replace).
    A small policy quotes the line it means to change imperfectly far more often than it
    names the wrong line (seen in RL runs); a target assigned twice is still ambiguous."""
    if len(want) == 1 and (m := _ASSIGN.match(want[0])):
        prefix = re.compile(rf"^{re.escape(m.group(1))}{re.escape(m.group(2))}\s*=(?!=)")
        hits = [j for j, line in enumerate(lines) if prefix.match(line)]
        keeps_name = any(prefix.match(r) for r in replace)
        if len(hits) != 1 or not keeps_name:
            return None
        return hits[0], _statement_end(lines, hits[0]), replace
    if all(_IMPORT.match(w) for w in want) and replace and all(_IMPORT.match(r) for r in replace):
        last = max((j for j, line in enumerate(lines) if _IMPORT.match(line)), default=-1)
        new = [r for r in replace if r.rstrip() not in {line.rstrip() for line in lines}]
        return last + 1, last + 1, new
    return None


def _statement_end(lines: list[str], start: int) -> int:
    """The line after the statement that begins on line ``start`` (a dict literal may span
    several); ``start + 1`` where the program does not parse."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return start + 1
    ends = [
        node.end_lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and node.lineno - 1 == start and node.end_lineno
    ]
    return max(ends, default=start + 1)


def _assignments(lines: list[str]) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Where each (name, indentation) is assigned in a parsable program: a list of [start, end)
    line spans, one per statement ``name = ...`` (a single plain name as the only target; a
    statement may span lines, as a dict literal does). Empty for an unparsable program."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and (name := _assigned_name(node)) and node.end_lineno:
            spans.setdefault((name, node.col_offset), []).append((node.lineno - 1, node.end_lineno))
    return spans


def _assigned_name(node: ast.stmt) -> str | None:
    """``name`` for a statement ``name = ...`` (one plain name, the only target), else None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def _statements(replace: list[str]) -> list[tuple[str, int, list[str]]] | None:
    """A replacement made only of assignments ``name = ...`` (comments and blank lines go with
    the statement after them): (name, indentation, its lines) each, or None."""
    text = "\n".join(replace)
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not tree.body:
        return None
    out, start = [], 0
    for node in tree.body:
        name = _assigned_name(node)
        if name is None or node.end_lineno is None:
            return None
        first = replace[node.lineno - 1]
        indent = len(first) - len(first.lstrip())
        out.append((name, indent, replace[start : node.end_lineno]))
        start = node.end_lineno
    if any(r.strip() for r in replace[start:]):
        return None  # trailing comments belong to no assignment
    return out


def _setting_swap(lines: list[str], search: list[str], replace: list[str]) -> list[str] | None:
    """An edit of assignments only whose replacement assigns none of the names its search
    assigns, but only names the program assigns once elsewhere (search ``PRODUCTS = []``,
    replacement ``ONE_HOT = []``): ``lines`` with the replacement put in place of those
    assignments (:func:`_by_target`), the searched lines kept; None for any other edit.

    Read literally such an edit deletes one setting and assigns another a second time, and the
    program dies on the name it lost (``NameError: name 'PRODUCTS' is not defined``: 33 of the
    failed revisions of six runs of the embedded policy, whose search lines quote a common
    settings line rather than the one it changes; docs/experiments/edit-applier.md). No edit
    means that: it reads as setting the names its replacement assigns."""
    searched = _statements(search)
    if searched is None:
        return None
    replaced = _statements(replace)
    if replaced is None or {n for n, _, _ in searched} & {n for n, _, _ in replaced}:
        return None
    return _by_target(lines, replaced)


def _by_target(
    lines: list[str], stmts: list[tuple[str, int, list[str]]] | None
) -> list[str] | None:
    """``lines`` with each assignment of a replacement (``stmts``, its :func:`_statements`) put
    in place of the program's one assignment of the same name at the same indentation, or None
    when the replacement is not all assignments (``stmts`` None) or one of its names is
    assigned nowhere or more than once there.

    The settings-block programs keep one decision on one line (``MODEL = "lightgbm"``), so an
    edit whose search text is found nowhere still says which decision it changes: the name its
    replacement assigns. A 4 M-parameter policy quotes the parent's line wrongly in about half
    of its edits while writing a well-formed new setting (docs/experiments/edit-applier.md)."""
    if stmts is None:
        return None
    spans = _assignments(lines)
    places = []
    for name, indent, new in stmts:
        found = spans.get((name, indent), [])
        if len(found) != 1:
            return None
        places.append((found[0], new))
    if len({span for span, _ in places}) != len(places):
        return None  # the same name twice in one replacement
    out = list(lines)
    for (start, end), new in sorted(places, reverse=True):
        out[start:end] = new
    return out


def apply_edits(parent: str, edits: list[Edit], anchored: bool = True) -> str:
    """``parent`` with each edit applied in turn.

    An edit's search lines must match consecutive lines of the program (as edited so far)
    exactly once, compared without trailing whitespace. With ``anchored`` a search found
    nowhere may still name its place (:func:`_anchor`: the one line assigning the same name, or
    the imports), or else the replacement names it (:func:`_by_target`: a replacement made only
    of assignments replaces the program's one assignment of each name at the same
    indentation). An edit of assignments whose replacement assigns other names than its search
    sets those names, found or not (:func:`_setting_swap`). An empty search, a search that
    names no place and an ambiguous one (found twice or more) raise :class:`EditError`:
    guessing between places would reward edits the prompt does not ask for."""
    lines = parent.splitlines()
    for i, (search, replace) in enumerate(edits, 1):
        want = [s.rstrip() for s in search]
        if not any(w.strip() for w in want):
            raise EditError(f"edit {i}: the search text is empty")
        have = [s.rstrip() for s in lines]
        at = [j for j in range(len(have) - len(want) + 1) if have[j : j + len(want)] == want]
        if anchored and (retargeted := _setting_swap(lines, search, replace)) is not None:
            lines = retargeted
            continue
        if len(at) == 1:
            lines[at[0] : at[0] + len(want)] = replace
            continue
        place = _anchor(lines, want, replace) if anchored and not at else None
        if place is not None:
            start, end, new = place
            lines[start:end] = new
            continue
        retargeted = _by_target(lines, _statements(replace)) if anchored and not at else None
        if retargeted is None:
            found = "not found" if not at else f"found {len(at)} times"
            raise EditError(f"edit {i}: the search text is {found} in the previous solution")
        lines = retargeted
    return "\n".join(lines).strip("\n") + "\n"


def format_edits(edits: list[Edit]) -> str:
    """The text of ``edits`` (what goes inside the answer's code block)."""
    return "\n".join(
        "\n".join([SEARCH, *search, DIVIDER, *replace, REPLACE]) for search, replace in edits
    )


def _occurrences(lines: list[str], want: list[str]) -> int:
    return sum(lines[j : j + len(want)] == want for j in range(len(lines) - len(want) + 1))


def _widen(a: list[str], lo: int, hi: int) -> tuple[int, int]:
    """[lo, hi) grown by one line each side at a time until its lines occur once in ``a``."""
    while (hi == lo or _occurrences(a, a[lo:hi]) != 1) and (lo > 0 or hi < len(a)):
        lo, hi = max(0, lo - 1), min(len(a), hi + 1)
    return lo, hi


def make_edits(parent: str, revised: str) -> list[Edit]:
    """Edits that turn ``parent`` into ``revised``: one per changed region, each search widened
    with unchanged neighbours until it is non-empty and unique; regions that then touch are
    merged. Falls back to one edit spanning every change, widened until it reproduces
    ``revised``, when the per-region edits would not (a later search made ambiguous by an
    earlier replacement, or an edit :func:`apply_edits` reads as setting other names)."""
    a = [line.rstrip() for line in parent.splitlines()]
    b = [line.rstrip() for line in revised.splitlines()]
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    changed = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in ops if tag != "equal"]
    if not changed:
        return []
    spans: list[list[int]] = []  # [lo, hi) in the parent
    for i1, i2, _, _ in changed:
        lo, hi = _widen(a, i1, i2)
        if spans and lo <= spans[-1][1]:  # touches the previous region: merge
            spans[-1] = list(_widen(a, spans[-1][0], hi))
        else:
            spans.append([lo, hi])

    def shift(at: int, inclusive: bool) -> int:  # lines gained by the changes before `at`
        return sum(
            (j2 - j1) - (i2 - i1)
            for i1, i2, j1, j2 in changed
            if i1 < at or (inclusive and i1 == at)
        )

    edits = [(a[lo:hi], b[lo + shift(lo, False) : hi + shift(hi, True)]) for lo, hi in spans]
    target = "\n".join(b).strip("\n") + "\n"
    try:
        if apply_edits(parent, edits) == target:
            return edits
    except EditError:
        pass
    lo, hi = _widen(a, changed[0][0], changed[-1][1])
    while True:  # wider until the edit applies literally (a search of the whole program does)
        edit = [(a[lo:hi], b[lo : len(b) - (len(a) - hi)])]
        if (lo, hi) == (0, len(a)):
            return edit
        try:
            if apply_edits(parent, edit) == target:
                return edit
        except EditError:
            pass
        lo, hi = max(0, lo - 1), min(len(a), hi + 1)


def edit_answer(parent: str, revised: str) -> str:
    """The code-block text of an answer whose edits turn ``parent`` into ``revised``."""
    return format_edits(make_edits(parent, revised))
