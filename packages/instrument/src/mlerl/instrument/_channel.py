"""Turning an instrumented program into the program that runs: the marker channel.

Two modes (:class:`MarkerMode`):

- ``secure`` (default): marker statements become calls of ``sys.audit`` that the host's audit
  hooks, installed by a prelude at the top of the program (:mod:`mlerl.instrument._prelude`:
  location binding, run-time keys, tamper evidence), turn into authenticated lines on a
  duplicate of fd 1. A marker earns credit only when it runs at the line where it was inserted,
  alone on that line; the nonce in the source is only a handshake, and
  :class:`mlerl.instrument._scanner.MarkerScanner` counts only lines carrying the key drawn at
  run time. :func:`clean_output` turns the channel's lines back into plain markers for prompts.

- ``paper``: the instrumented program runs as is and plain ``print`` output is matched by
  regex, exactly as in the paper. Forgeable: the program's own prints count too.

Before either, :func:`prepare_run` drops every marker of a program that uses introspection or
monkeypatching constructs (:func:`mlerl.instrument._trust.untrusted_reason`): such a program
runs normally but earns no partial credit. What remains is in docs/instrument.md ("Residual
risk"): raw memory reads that raise no audit event, native code, and stage work that is real
but trivial; the gain is bounded by ``7 * per_marker`` (0.7) on a failed run.
"""

from __future__ import annotations

import ast
import enum
import re
import secrets
from dataclasses import dataclass

from mlerl.instrument._markers import marker_of
from mlerl.instrument._prelude import MARKER_EVENT, VALUE_EVENT, render_prelude
from mlerl.instrument._trust import untrusted_reason
from mlerl.instrument._verify import _Src


class MarkerMode(str, enum.Enum):
    # lower-case member names: they are the YAML values of `instrument.markers` (OmegaConf
    # matches enum names)
    secure = "secure"
    """Nonce channel; unforgeable by plain prints (only channel markers count)."""
    paper = "paper"
    """Plain prints + regex, for exact reproduction of the paper (forgeable by any print)."""


@dataclass(frozen=True)
class PreparedRun:
    program: str
    """The program to execute as ``main.py``."""
    nonce: str | None
    """Pass to :class:`MarkerScanner`; None in paper mode."""
    mode: MarkerMode
    untrusted: str | None = None
    """Why the program's markers were dropped (introspection / monkeypatching), else None."""


def _fresh_name(code: str) -> str:
    while True:
        name = "_" + secrets.token_hex(8)
        if name not in code:
            return name


def _prelude_at(tree: ast.Module, src: _Src) -> tuple[int, int]:
    """Byte range the prelude replaces: the start of the program or after ``__future__``."""
    last = None
    for i, stmt in enumerate(tree.body):
        docstring = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (docstring or future):
            break
        last = stmt
    if last is None:
        return 0, 0
    assert last.end_lineno is not None and last.end_col_offset is not None
    end = src.offset(last.end_lineno, last.end_col_offset)
    rest = src.data[end:].split(b"\n", 1)[0]
    skip = rest.index(b";") + 1 if rest.strip().startswith(b";") else 0
    return end, end + skip


_AUDIT = '__import__("sys").audit'


def _emit_call(stmt: ast.Expr, marker: str) -> str:
    args = stmt.value.args  # type: ignore[attr-defined]  # a marker statement: an Expr holding a Call
    call = f"{_AUDIT}({MARKER_EVENT!r}, {marker!r})"
    if len(args) == 1 and isinstance(args[0], ast.Constant):
        return call
    values = ast.unparse(ast.Tuple(elts=list(args), ctx=ast.Load()))
    return f"{call}; {_AUDIT}({VALUE_EVENT!r}, {marker!r}, lambda: {values})"


def _alone(markers: list[ast.stmt], tree: ast.Module) -> set[int]:
    """ids of marker statements alone on their lines (no other marker, no program expression)."""
    inside = {id(n) for m in markers for n in ast.walk(m)}
    busy: dict[int, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.expr) and id(n) not in inside:
            for line in range(n.lineno, (n.end_lineno or n.lineno) + 1):
                busy[line] = busy.get(line, 0) + 1
    for m in markers:
        for line in range(m.lineno, (m.end_lineno or m.lineno) + 1):
            busy[line] = busy.get(line, 0) + 1
    return {
        id(m)
        for m in markers
        if all(busy[line] == 1 for line in range(m.lineno, (m.end_lineno or m.lineno) + 1))
    }


def prepare_run(
    instrumented_code: str, mode: MarkerMode | str = MarkerMode.secure, *, nonce: str | None = None
) -> PreparedRun:
    """The program to run and the nonce its markers carry.

    ``instrumented_code`` must come from an instrumenter (``instrument_ast`` or
    ``LMInstrumenter``): their output's marker statements are all inserted ones, while in raw
    policy code they would be the policy's own prints. Code that does not parse is returned
    unchanged (it fails at start-up and reaches no marker). ``nonce`` is for tests; by default
    a fresh 128-bit one is drawn. A program flagged by the introspection check
    (:attr:`PreparedRun.untrusted`) keeps the channel but loses every marker.
    """
    mode = MarkerMode(mode)
    if mode is MarkerMode.paper:
        return PreparedRun(instrumented_code, None, mode)
    nonce = nonce or secrets.token_hex(16)
    if not re.fullmatch(r"[0-9A-Za-z_-]{8,128}", nonce):
        raise ValueError("nonce must be 8-128 characters of [0-9A-Za-z_-]")
    try:
        tree = ast.parse(instrumented_code)
    except (SyntaxError, ValueError):
        return PreparedRun(instrumented_code, nonce, mode)
    untrusted = untrusted_reason(tree)
    src = _Src.of(instrumented_code)
    mk = _fresh_name(instrumented_code)
    table_token = f"@TABLE{mk}@"
    markers = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and marker_of(n) is not None]
    alone = _alone(markers, tree)
    edits: list[tuple[int, int, bytes, str | None]] = []
    for node in markers:
        marker = marker_of(node)
        assert (
            marker is not None and node.end_lineno is not None and node.end_col_offset is not None
        )
        start = src.offset(node.lineno, node.col_offset)
        end = src.offset(node.end_lineno, node.end_col_offset)
        if untrusted is None and id(node) in alone:
            edits.append((start, end, _emit_call(node, marker).encode(), marker))  # type: ignore[arg-type]  # nodes in `alone` are marker Expr statements
        else:
            edits.append((start, end, b"None", None))
    start, end = _prelude_at(tree, src)
    prelude = render_prelude(mk, nonce, table_token)
    edits.append((start, end, (b"\n" if start else b"") + prelude.encode(), None))
    edits.sort(key=lambda e: e[0])
    shift, where = 0, []
    for s, e, text, marker in edits:
        if marker is not None:
            where.append((s + shift, marker))
        shift += len(text) - (e - s)
    out = src.data
    for s, e, text, _ in reversed(edits):
        out = out[:s] + text + out[e:]
    table = {out.count(b"\n", 0, pos) + 1: marker for pos, marker in where}
    out = out.replace(table_token.encode(), repr(table).encode())
    return PreparedRun(out.decode("utf-8"), nonce, mode, untrusted)


def _keys(text: str, nonce: str) -> tuple[int, int, str, str] | None:
    m = re.search(
        r"(?:^|\n)" + re.escape(nonce) + r":key ([0-9a-f]{32}) ([0-9a-f]{32})(?:\n|$)", text
    )
    if m is None or text[: m.start()].strip():
        return None
    return m.start(), m.end(), m.group(1), m.group(2)


def clean_output(text: str, nonce: str | None) -> str:
    """Program output as the paper shows it (for prompts): channel lines become plain markers.

    The handshake and taint lines disappear; ``<K>:m`` followed by its value line ``<V>:m v``
    becomes ``m v``; a lone ``<K>:m`` becomes ``m``.
    """
    if not nonce:
        return text
    keys = _keys(text, nonce)
    if keys is None:
        return text
    start, end, key, vkey = keys
    text = text[:start] + "\n" + text[end:]
    k, v = re.escape(key), re.escape(vkey)
    text = re.sub(r"\n" + k + r":tainted[^\n]*(?=\n|$)", "", text)
    text = re.sub(r"\n" + k + r":([^\n]*)\n\n" + v + r":\1 ", r"\n" + k + r":\1 ", text)
    for tag in (k, v):
        text = re.sub(r"(^|\n)\n" + tag + ":", r"\1", text)
        text = re.sub(r"\n" + tag + ":", "\n", text)
    return text[1:] if text.startswith("\n") and start == 0 else text
