"""The seven progress markers and the one statement form that counts as a marker.

A *marker statement* is a module- or block-level expression statement of the form::

    print("loaded data")
    print("testing loss:", acc)          # loss markers only: extra simple arguments
    print(f"training loss: {loss:.4f}")  # loss markers only: an f-string with simple fields

with no keyword arguments. Anything else (``print("loaded data", sep=" ")``, ``print(*xs)``,
``exec(...)``) is ordinary program code. The instrumenters rely on this: a program's *own*
marker-form prints are rewritten to carry ``sep=" "`` (same output, no longer marker form),
so every marker statement in an instrumented program was inserted by an instrumenter.

Extra arguments of a loss marker must be *simple*: names, constants, attribute and constant
subscript chains, or a few side-effect-free calls (``x.item()``, ``float(x)``, ``round(x, 4)``).
That keeps an inserted marker from being a vehicle for new program logic.
"""

from __future__ import annotations

import ast

MARKERS: tuple[str, ...] = (
    "imported packages",
    "loaded data",
    "defined model",
    "training loss:",
    "trained model",
    "testing loss:",
    "predicted test labels",
)
"""The paper's markers (appendix C.3), in pipeline order."""

LOSS_MARKERS: frozenset[str] = frozenset({"training loss:", "testing loss:"})
"""Markers that may carry a value (``print("testing loss:", acc)``)."""

_PURE_METHODS = frozenset({"item", "mean", "sum", "numpy", "detach", "cpu", "tolist"})
_PURE_BUILTINS = frozenset({"float", "int", "round", "len", "str", "abs"})


def match_marker(text: str) -> str | None:
    """The marker a printed string stands for, or None. Loss markers may carry a suffix."""
    t = text.strip()
    for m in MARKERS:
        if t == m or (m in LOSS_MARKERS and t.startswith(m)):
            return m
    return None


def is_simple(node: ast.expr) -> bool:
    """True for expressions an inserted marker may evaluate (no side effects, no new logic)."""
    match node:
        case ast.Constant() | ast.Name():
            return True
        case ast.Attribute(value=v):
            return is_simple(v)
        case ast.Subscript(value=v, slice=s):
            return is_simple(v) and is_simple(s)
        case ast.UnaryOp(op=ast.USub(), operand=o):
            return is_simple(o)
        case ast.Call(func=ast.Attribute(value=v, attr=a), args=[], keywords=[]):
            return a in _PURE_METHODS and is_simple(v)
        case ast.Call(func=ast.Name(id=f), args=args, keywords=[]):
            return f in _PURE_BUILTINS and 0 < len(args) <= 2 and all(map(is_simple, args))
        case ast.FormattedValue(value=v, format_spec=spec):
            return is_simple(v) and (spec is None or is_simple(spec))
        case ast.JoinedStr(values=vals):
            return all(is_simple(v) for v in vals)
    return False


def _leading_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value
    return None


def marker_of(stmt: ast.stmt) -> str | None:
    """The marker ``stmt`` emits if it is a marker statement (see module doc), else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not (isinstance(call.func, ast.Name) and call.func.id == "print"):
        return None
    if call.keywords or not call.args:
        return None
    text = _leading_text(call.args[0])
    marker = None if text is None else match_marker(text)
    if marker is None:
        return None
    if marker not in LOSS_MARKERS:
        only_text = len(call.args) == 1 and isinstance(call.args[0], ast.Constant)
        return marker if only_text and text.strip() == marker else None  # type: ignore[union-attr]  # only_text: the one argument is a str Constant
    return marker if all(is_simple(a) for a in call.args) else None
