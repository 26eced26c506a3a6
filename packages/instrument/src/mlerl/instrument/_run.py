"""Turning an instrumented program into the program that runs: the marker channel.

Two modes (:class:`MarkerMode`):

- ``secure`` (default): every marker statement ``print("m", ...)`` is replaced by a call to an
  emitter function with a random per-run name, defined by a prelude inserted at the top (after
  the docstring and ``__future__`` imports). The emitter writes ``\\n<nonce>:<marker>[ value]\\n``
  with one ``os.write`` on a duplicate of fd 1 taken at start, so redirecting ``sys.stdout``
  does not hide markers and a marker line is never split by the program's buffered output. The
  nonce is 128 random bits, fresh per run; only lines starting with it count
  (:class:`mlerl.instrument.MarkerScanner`). A program that prints marker strings itself gains
  nothing. Marker values are evaluated lazily inside ``try`` (``lambda: (...)``), so a marker
  can never raise into the program; each marker is emitted at most ``emit_limit`` times.
- ``paper``: the instrumented program runs as is and plain ``print`` output is matched by
  regex, exactly as in the paper. Forgeable: the program's own prints count too.

What the secure channel does NOT stop (residual risk, see docs/instrument.md): the nonce and
the emitter live in the program's own process. A program written to introspect itself can find
them (``globals()``, the emitter's closure, frame code constants, ``gc.get_objects()``,
``/proc/self/mem``) and forge markers. Mitigation implemented: after start the prelude
overwrites the nonce and the emitter's name in ``main.py`` on disk (when writable), so reading
one's own source reveals neither. The policy never sees the nonce or the name; forging takes a
deliberate self-inspecting program, which the reward cannot tell from honest work.
"""

from __future__ import annotations

import ast
import enum
import re
import secrets
from dataclasses import dataclass

from mlerl.instrument._markers import marker_of
from mlerl.instrument._verify import _Src

EMIT_LIMIT = 100
"""Most times one marker is written per run (a marker in a hot path cannot flood the output)."""


class MarkerMode(str, enum.Enum):
    SECURE = "secure"
    """Nonce channel; unforgeable by plain prints."""
    PAPER = "paper"
    """Plain prints + regex, for exact reproduction of the paper."""


@dataclass(frozen=True)
class PreparedRun:
    program: str
    """The program to execute as ``main.py``."""
    nonce: str | None
    """Pass to :class:`MarkerScanner`; None in paper mode."""
    mode: MarkerMode


_PRELUDE = '''\
def {mk}():
    import os, sys
    nonce, name, mk = "{nonce}", "{name}", "{mk}"
    try:
        fd = os.dup(1)
    except OSError:
        fd = 1
    try:
        with open(__file__, encoding="utf-8") as f:
            text = f.read()
        text = text.replace(nonce, "0" * len(nonce)).replace(name, "_" * len(name)).replace(mk, "_" * len(mk))
        with open(__file__, "w", encoding="utf-8") as f:
            f.write(text)
    except Exception:
        pass
    counts = {{}}
    def emit(marker, values=None):
        seen = counts.get(marker, 0)
        if seen >= {limit}:
            return
        counts[marker] = seen + 1
        text = ""
        if values is not None:
            try:
                text = " ".join(str(v) for v in values())
            except Exception:
                text = ""
            if text.startswith(marker):
                text = text[len(marker):]
            text = " ".join(text.split())[:200]
        try:
            sys.stdout.flush()
        except Exception:
            pass
        line = "\\n" + nonce + ":" + marker + (" " + text if text else "") + "\\n"
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        except OSError:
            pass
    return emit
{name} = {mk}()
del {mk}
'''


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


def _emit_call(stmt: ast.Expr, name: str, marker: str) -> str:
    args = stmt.value.args  # type: ignore[attr-defined]
    if len(args) == 1 and isinstance(args[0], ast.Constant):
        return f"{name}({marker!r})"
    values = ast.unparse(ast.Tuple(elts=list(args), ctx=ast.Load()))
    return f"{name}({marker!r}, lambda: {values})"


def prepare_run(
    instrumented_code: str, mode: MarkerMode | str = MarkerMode.SECURE, *, nonce: str | None = None
) -> PreparedRun:
    """The program to run and the nonce its markers carry.

    ``instrumented_code`` must come from an instrumenter (``instrument_ast`` or
    ``LMInstrumenter``): their output's marker statements are all inserted ones, while in raw
    policy code they would be the policy's own prints. Code that does not parse is returned
    unchanged (it fails at start-up and reaches no marker). ``nonce`` is for tests; by default
    a fresh 128-bit one is drawn.
    """
    mode = MarkerMode(mode)
    if mode is MarkerMode.PAPER:
        return PreparedRun(instrumented_code, None, mode)
    nonce = nonce or secrets.token_hex(16)
    if not re.fullmatch(r"[0-9A-Za-z_-]{8,128}", nonce):
        raise ValueError("nonce must be 8-128 characters of [0-9A-Za-z_-]")
    try:
        tree = ast.parse(instrumented_code)
    except (SyntaxError, ValueError):
        return PreparedRun(instrumented_code, nonce, mode)
    src = _Src.of(instrumented_code)
    name = _fresh_name(instrumented_code)
    mk = _fresh_name(instrumented_code + name)
    edits: list[tuple[int, int, bytes]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and (marker := marker_of(node)) is not None:
            assert node.end_lineno is not None and node.end_col_offset is not None
            start = src.offset(node.lineno, node.col_offset)
            end = src.offset(node.end_lineno, node.end_col_offset)
            edits.append((start, end, _emit_call(node, name, marker).encode()))  # type: ignore[arg-type]
    start, end = _prelude_at(tree, src)
    prelude = _PRELUDE.format(mk=mk, name=name, nonce=nonce, limit=EMIT_LIMIT)
    edits.append((start, end, (b"\n" if start else b"") + prelude.encode()))
    out = src.data
    for s, e, text in sorted(edits, key=lambda x: x[0], reverse=True):
        out = out[:s] + text + out[e:]
    return PreparedRun(out.decode("utf-8"), nonce, mode)


def clean_output(text: str, nonce: str | None) -> str:
    """Program output as the paper shows it: ``<nonce>:m`` lines become ``m`` (for prompts)."""
    if not nonce:
        return text
    text = re.sub(r"(^|\n)\n" + re.escape(nonce) + ":", r"\1", text)
    return text.replace("\n" + nonce + ":", "\n")
