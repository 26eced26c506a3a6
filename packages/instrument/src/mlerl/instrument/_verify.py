"""Verification: an instrumented program is the original plus inserted marker statements only.

:func:`finalize` parses both programs and aligns them statement list by statement list: every
statement of the original must appear, in order and with an identical AST (attributes such as
line numbers ignored), and every extra statement of the candidate must be a marker statement
(:func:`mlerl.instrument._markers.marker_of`). Renaming a variable, dropping or reordering a
line, or adding any other code is a mismatch. On success the original's own marker-form
prints are rewritten in the candidate's text to ``print(..., sep=" ")`` (identical output, no
longer marker form), so the result's marker statements are exactly the inserted ones.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from mlerl.instrument._markers import marker_of


class Rejected(Exception):
    """A candidate failed verification. ``reason`` is a short code, ``detail`` says more."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _is_stmt_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], ast.stmt)


def _same(orig: object, cand: object, own: list[ast.stmt]) -> bool:
    """Structural equality that lets statement lists of ``cand`` hold extra marker statements.

    Appends to ``own`` the candidate statements that are the original's own marker-form prints.
    """
    if isinstance(orig, ast.AST):
        if type(orig) is not type(cand):
            return False
        for field, oval in ast.iter_fields(orig):
            cval = getattr(cand, field, None)
            if _is_stmt_list(oval):
                if not isinstance(cval, list) or not _same_body(oval, cval, own):
                    return False
            elif not _same(oval, cval, own):
                return False
        return True
    if isinstance(orig, list):
        if not isinstance(cand, list) or len(orig) != len(cand):
            return False
        return all(_same(o, c, own) for o, c in zip(orig, cand, strict=True))
    return type(orig) is type(cand) and orig == cand


def _same_body(obody: list[ast.stmt], cbody: list[ast.stmt], own: list[ast.stmt]) -> bool:
    # Greedy: a candidate statement equal to the next original one is that original statement.
    # When an inserted marker equals the original's next statement the two are interchangeable,
    # so the choice does not change the result.
    i = 0
    for c in cbody or []:
        trial: list[ast.stmt] = []
        if i < len(obody) and _same(obody[i], c, trial):
            own.extend(trial)
            if marker_of(c) is not None:
                own.append(c)
            i += 1
        elif marker_of(c) is None:
            return False
    return i == len(obody or [])


@dataclass(frozen=True)
class _Src:
    """Source bytes with (lineno, byte col) -> absolute offset, as ast positions are bytes."""

    data: bytes
    starts: tuple[int, ...]

    @classmethod
    def of(cls, code: str) -> _Src:
        data = code.encode("utf-8")
        starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                starts.append(i + 1)
        return cls(data, tuple(starts))

    def offset(self, lineno: int, col: int) -> int:
        return self.starts[lineno - 1] + col


def apply_edits(src: _Src, edits: list[tuple[int, bytes]]) -> str:
    """Insert each ``(offset, text)`` into the source; later offsets first keeps them valid."""
    out = src.data
    for off, text in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:off] + text + out[off:]
    return out.decode("utf-8")


def parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        raise Rejected("syntax_error", f"{what} does not parse: {exc}") from None


def count_markers(tree: ast.AST) -> int:
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.stmt) and marker_of(n))


def finalize(original: str, candidate: str) -> str:
    """``candidate`` with the original's own marker prints neutralised; raises :class:`Rejected`.

    Reasons: ``syntax_error`` (either program does not parse), ``modified_program`` (the
    candidate differs from the original by more than inserted marker statements).
    """
    otree = parse(original, "original program")
    ctree = parse(candidate, "instrumented program")
    own: list[ast.stmt] = []
    if not _same(otree, ctree, own):
        raise Rejected("modified_program", "differs from the original beyond marker statements")
    src = _Src.of(candidate)
    edits = []
    for stmt in own:
        last = stmt.value.args[-1]  # type: ignore[attr-defined]  # own holds marker Expr statements (Calls)
        edits.append((src.offset(last.end_lineno, last.end_col_offset), b', sep=" "'))
    result = apply_edits(src, edits)
    inserted = count_markers(ctree) - len(own)
    if count_markers(parse(result, "neutralised program")) != inserted:  # pragma: no cover
        raise Rejected("modified_program", "neutralising the original's own prints failed")
    return result
