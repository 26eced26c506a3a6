"""The position check of an LM's instrumented program: :func:`misplaced_markers` lists the
markers that no stage justifies where they stand (a statement dominating the marker must trigger
that stage under the placement rules of :mod:`mlerl.instrument._rules`), in the context those
rules would use (:func:`verification_context`).
"""

from __future__ import annotations

import ast

from mlerl.instrument._context import Context, make_context, walk_scope
from mlerl.instrument._rules import has_predict_calls, is_backward, triggers


def _sub_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    bodies = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
    bodies += [h.body for h in getattr(stmt, "handlers", [])]
    bodies += [c.body for c in getattr(stmt, "cases", [])]
    return [b for b in bodies if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def misplaced_markers(tree: ast.Module, ctx: Context) -> list[tuple[int, str]]:
    """(line, marker) for each marker statement of ``tree`` that no stage justifies.

    A marker is justified by a statement that *dominates* it (an earlier statement of its own
    block or of an enclosing block) and triggers that stage under the placement rules: a simple
    statement, a loop (its whole body), a ``with`` block, or a call of a program function whose
    body triggers it; ``imported packages`` by an import. ``if``/``try``/``match`` statements
    justify nothing after them (their branch may not have run): the marker belongs inside.
    """
    from mlerl.instrument._markers import marker_of

    funcs = {
        f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    memo: dict[str, set[str]] = {}

    def of_function(name: str) -> set[str]:
        if name not in memo:
            memo[name] = set()  # recursion guard
            memo[name] = set().union(*(of_stmt(s, deep=True) for s in funcs[name].body))
        return memo[name]

    def of_stmt(s: ast.stmt, deep: bool = False) -> set[str]:
        if isinstance(s, ast.Import | ast.ImportFrom):
            return {"imported packages"}
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return set()
        loop = isinstance(s, ast.For | ast.AsyncFor | ast.While)
        if not (loop or deep or isinstance(s, ast.With | ast.AsyncWith)) and _sub_bodies(s):
            return set()
        found = triggers(s, ctx)
        if loop and any(is_backward(n, ctx) for n in ast.walk(s)):
            found |= {"training loss:", "trained model"}
        for n in walk_scope(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs:
                found |= of_function(n.func.id)
        return found

    bad: list[tuple[int, str]] = []

    def body(stmts: list[ast.stmt], justified: set[str]) -> None:
        cur = set(justified)
        for s in stmts:
            m = marker_of(s)
            if m is not None:
                if m not in cur:
                    bad.append((s.lineno, m))
                continue
            for sub in _sub_bodies(s):
                body(sub, cur)
            cur |= of_stmt(s)

    body(tree.body, set())
    return bad


def verification_context(tree: ast.Module) -> Context:
    """The context the placement rules would use for ``tree`` (submission fallback included)."""
    ctx = make_context(tree)
    predicts = any(
        "predicted test labels" in triggers(s, ctx)
        for s in ast.walk(tree)
        if isinstance(s, ast.stmt)
    )
    ctx.submission_fallback = not predicts and not has_predict_calls(tree)
    return ctx
