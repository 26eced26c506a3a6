"""The deterministic instrumenter: marker statements inserted by AST rules, no LM.

Guarantees: the output parses; it equals the input plus inserted marker statements (checked by
:func:`mlerl.instrument._verify.finalize`, the same verifier the LM path uses); the input's own
marker-form prints are neutralised, so every marker statement in the output was inserted here.
If an insertion would not verify (odd layouts such as ``a = f(); b = g()`` lines are handled,
but the verifier has the last word), the output is the neutralised input with no markers.
Placement rules live in :mod:`mlerl.instrument._rules`.
"""

from __future__ import annotations

import ast

from mlerl.instrument._context import Context, make_context
from mlerl.instrument._markers import LOSS_MARKERS, MARKERS
from mlerl.instrument._rules import has_predict_calls, is_backward, triggers, value_name
from mlerl.instrument._verify import Rejected, _Src, apply_edits, finalize

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Plan = list[tuple[ast.stmt, dict[str, str | None]]]
"""(statement, {marker: variable to print or None}) -> markers go after the statement."""


def _sub_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    bodies = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
    bodies += [h.body for h in getattr(stmt, "handlers", [])]
    bodies += [c.body for c in getattr(stmt, "cases", [])]
    return [b for b in bodies if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _plan_body(body: list[ast.stmt], ctx: Context, out: Plan) -> None:
    local: Plan = []
    for stmt in body:
        if isinstance(stmt, _SCOPES):
            _plan_body(stmt.body, ctx, out)
            continue
        if isinstance(stmt, _LOOPS):
            found = triggers(stmt, ctx)
            if any(is_backward(n, ctx) for n in ast.walk(stmt)):
                found |= {"training loss:", "trained model"}
            local.append((stmt, dict.fromkeys(found)))
            continue
        subs = _sub_bodies(stmt)
        if subs:  # if / with / try / match: markers go inside the taken branch
            for sub in subs:
                _plan_body(sub, ctx, out)
            local.append((stmt, {}))
            continue
        found = triggers(stmt, ctx)
        var = value_name(stmt)
        local.append((stmt, {m: (var if m in LOSS_MARKERS else None) for m in found}))
    # Consecutive statements triggering the same marker share one marker after the last.
    for i, (stmt, marks) in enumerate(local):
        nxt = local[i + 1][1] if i + 1 < len(local) else {}
        kept = {m: v for m, v in marks.items() if m not in nxt}
        if kept:
            out.append((stmt, kept))


def _import_anchor(tree: ast.Module, plan: Plan) -> ast.stmt | None:
    body = tree.body
    marked = {id(s) for s, _ in plan}
    work = [
        i
        for i, s in enumerate(body)
        if not isinstance(s, _SCOPES) and any(id(n) in marked for n in ast.walk(s))
    ]
    first = work[0] if work else len(body)
    imports = [s for s in body[:first] if isinstance(s, ast.Import | ast.ImportFrom)]
    if not imports:
        imports = [s for s in body if isinstance(s, ast.Import | ast.ImportFrom)]
    return imports[-1] if imports else None


def plan_markers(tree: ast.Module) -> Plan:
    """Where each marker goes (see :mod:`mlerl.instrument._rules`)."""
    ctx = make_context(tree)
    plan: Plan = []
    _plan_body(tree.body, ctx, plan)
    if not any("predicted test labels" in m for _, m in plan) and not has_predict_calls(tree):
        ctx.submission_fallback = True
        plan = []
        _plan_body(tree.body, ctx, plan)
    anchor = _import_anchor(tree, plan)
    if anchor is not None:
        plan.append((anchor, {"imported packages": None}))
    return plan


def _marker_line(marker: str, var: str | None) -> str:
    return f'print("{marker}", {var})' if var else f'print("{marker}")'


def _insertions(code: str, plan: Plan) -> list[tuple[int, bytes]]:
    src = _Src.of(code)
    by_stmt: dict[int, tuple[ast.stmt, dict[str, str | None]]] = {}
    for stmt, marks in plan:
        prev = by_stmt.get(id(stmt), (stmt, {}))[1]
        by_stmt[id(stmt)] = (stmt, {**prev, **marks})
    edits: list[tuple[int, bytes]] = []
    for stmt, marks in by_stmt.values():
        line = src.data[src.starts[stmt.lineno - 1] :].split(b"\n", 1)[0]
        indent = line[: stmt.col_offset]
        if indent.strip(b" \t"):  # shares its line with a compound header: no marker
            continue
        assert stmt.end_lineno is not None
        at = src.starts[stmt.end_lineno] if stmt.end_lineno < len(src.starts) else len(src.data)
        lead = b"" if at > 0 and src.data[at - 1 : at] == b"\n" else b"\n"
        text = "".join(
            indent.decode() + _marker_line(m, marks[m]) + "\n" for m in MARKERS if m in marks
        )
        edits.append((at, lead + text.encode()))
    return edits


def instrument_ast(code: str) -> str:
    """Insert the seven markers after the operations they describe; raises SyntaxError.

    Deterministic and LM-free; the result is ready for :func:`mlerl.instrument.prepare_run`.
    """
    tree = ast.parse(code)
    candidate = apply_edits(_Src.of(code), _insertions(code, plan_markers(tree)))
    try:
        return finalize(code, candidate)
    except Rejected:
        return finalize(code, code)
