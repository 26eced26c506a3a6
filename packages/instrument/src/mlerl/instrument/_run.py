"""Turning an instrumented program into the program that runs: the marker channel.

Two modes (:class:`MarkerMode`):

- ``secure`` (default): marker statements become calls of ``sys.audit`` that the host's audit
  hooks, installed by a prelude at the top of the program, turn into authenticated lines on a
  duplicate of fd 1. Markers are bound to *where* they run, not to what is passed:

  * **Location binding.** The prelude records the program's own code objects (identity) and the
    line of every inserted marker (a table fixed at instrumentation time). The hook credits a
    ``mlerl.marker`` event only if the calling frame runs one of those code objects at a marker
    line, and credits that line's marker whatever the arguments say. Calling ``sys.audit`` from
    anywhere else, from ``exec``'d or rebuilt code, or with another stage, earns nothing; each
    marker must be alone on its line (otherwise it is dropped), so no program code shares it.
  * **No reachable secret.** The nonce in the source is only a handshake: the prelude's first
    write is ``\\n<nonce>:key <K> <V>\\n`` with two keys drawn at run time from ``os.urandom``,
    and :class:`MarkerScanner` accepts only that first line, then counts only ``<K>:<marker>``.
    Reading the nonce from the source or ``co_consts`` is useless afterwards. ``K`` lives only
    in the marker hook's closure; audit hooks cannot be listed, the hook never runs program code
    (every builtin it uses is captured at start-up), and values are rendered by a separate hook
    holding only ``V`` (display-only ``<V>:<marker> <value>`` lines, no credit).
  * **Tamper evidence.** The marker hook watches the introspection paths that could still reach
    ``K`` or fake a marker line: ``gc.get_objects/get_referrers/get_referents``,
    ``sys._current_frames``, ``sys.settrace/setprofile`` (line jumps), ctypes raw memory reads,
    the program's own code reading ``__code__``/``f_code``/``tb_frame``/``gi_frame``..., ``exec`` of
    the program's own code objects, opening ``/proc/*/mem``, ``/proc/*/fd/*`` or ``/dev/fd/*``
    (re-reading its own stdout pipe) and writing ``.py``/``.so`` files. The first such event
    writes ``<K>:tainted <event>`` *before* the operation runs; the scanner credits nothing after
    it. The script directory is removed from ``sys.path`` (no self-written ``pandas.py``).

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
from mlerl.instrument._trust import untrusted_reason
from mlerl.instrument._verify import _Src

EMIT_LIMIT = 100
"""Most times one marker is written per run (a marker in a hot path cannot flood the output)."""

MARKER_EVENT = "mlerl.marker"
VALUE_EVENT = "mlerl.value"


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


# The prelude. Placeholders: @MK@ (random name of this function), @NONCE@, @TABLE@ (one line:
# {line: marker}), @LIMIT@. The hooks use only objects captured here, before any program code
# runs, so the program cannot make them run its code (by patching a builtin, a str subclass...).
_PRELUDE = '''\
def @MK@():
    import os, sys, _thread
    getframe, write, ident, getcwd = sys._getframe, os.write, _thread.get_ident, os.getcwd
    _id, _type, _len, _str, _bytes, _int = id, type, len, str, bytes, int
    s_starts, s_ends, s_split, s_join = str.startswith, str.endswith, str.split, str.join
    s_enc, b_dec = str.encode, bytes.decode
    limit = @LIMIT@
    try:
        fd = os.dup(1)
    except OSError:
        fd = 1
    try:
        here = os.path.dirname(os.path.realpath(__file__))
        if sys.path and os.path.realpath(sys.path[0] or ".") == here:
            del sys.path[0]
    except Exception:
        pass
    module = getframe(1).f_code
    code_type = type(module)
    codes, todo = [], [module]
    while todo:
        c = todo.pop()
        if c.co_name != "@MK@":
            codes.append(c)
            todo.extend(k for k in c.co_consts if type(k) is code_type)
    key, vkey = os.urandom(16).hex(), os.urandom(16).hex()
    try:
        write(fd, ("\\n@NONCE@:key " + key + " " + vkey + "\\n").encode())
    except OSError:
        pass

    def flusher(event, args):
        if event == "mlerl.marker":
            try:
                sys.stdout.flush()
            except Exception:
                pass

    def marker_hook(keep, ids, lines, key):
        busy, counts, dead = set(), {}, False
        watch = frozenset((
            "mlerl.marker", "object.__getattr__", "exec", "open", "os.symlink", "os.link",
            "os.rename", "os.replace", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
            "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
            "ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata"))
        code_attrs = frozenset((
            "__code__", "f_code", "gi_code", "cr_code", "ag_code", "tb_frame", "gi_frame",
            "cr_frame", "ag_frame", "__globals__"))

        def send(text):
            try:
                write(fd, s_enc("\\n" + key + ":" + text + "\\n", "utf-8", "replace"))
            except OSError:
                pass

        def norm(path):
            t = _type(path)
            if t is _bytes:
                path = b_dec(path, "utf-8", "replace")
            elif t is not _str:
                return None
            if not s_starts(path, "/"):
                path = getcwd() + "/" + path
            parts = []
            for p in s_split(path, "/"):
                if p == "..":
                    if parts:
                        parts.pop()
                elif p and p != ".":
                    parts.append(p)
            return "/" + s_join("/", parts)

        def special(path, reading):
            p = norm(path)
            if p is None:
                return None
            parts = s_split(p, "/")
            if _len(parts) > 2 and parts[1] == "proc":
                if "mem" in parts or "map_files" in parts or ("fd" in parts and reading):
                    return p
            if reading and s_starts(p, ("/dev/fd", "/dev/stdout", "/dev/stderr")):
                return p
            return None

        def check(event, args, frame):
            if event == "object.__getattr__":
                name = args[1]
                if _type(name) is _str and name in code_attrs and _id(frame.f_code) in ids:
                    return "reads ." + name
            elif event == "exec":
                if _id(args[0]) in ids:
                    return "exec of the program's own code"
            elif event == "open":
                mode, flags = args[1], args[2]
                if _type(flags) is not _int:
                    flags = 0
                if _type(mode) is _str:
                    reading = "r" in mode or "+" in mode
                    writing = "w" in mode or "a" in mode or "x" in mode or "+" in mode
                else:
                    reading, writing = (flags & 3) != 1, (flags & 3) != 0
                p = special(args[0], reading)
                if p is not None:
                    return "opens " + p
                p = norm(args[0])
                if writing and p is not None and s_ends(p, (".py", ".pyc", ".so")):
                    return "writes " + p
            elif event in ("os.symlink", "os.link", "os.rename", "os.replace"):
                if special(args[0], True) is not None:
                    return event + " " + norm(args[0])
                p = norm(args[1])
                if p is not None and s_ends(p, (".py", ".pyc", ".so")):
                    return event + " " + p
            else:
                return event
            return None

        def hook(event, args):
            nonlocal dead
            if dead or _type(event) is not _str or event not in watch:
                return
            me = ident()
            if me in busy:
                return
            busy.add(me)
            try:
                frame = getframe(1)
                if event == "mlerl.marker":
                    if _id(frame.f_code) in ids:
                        marker = lines.get(frame.f_lineno)
                        if marker is not None:
                            seen = counts.get(marker, 0)
                            if seen < limit:
                                counts[marker] = seen + 1
                                send(marker)
                else:
                    why = check(event, args, frame)
                    if why is not None:
                        dead = True
                        send("tainted " + why)
            except Exception:
                pass
            finally:
                busy.discard(me)
        return hook

    def value_hook(ids, lines, vkey):
        busy, counts = set(), {}

        def hook(event, args):
            if _type(event) is not _str or event != "mlerl.value":
                return
            me = ident()
            if me in busy:
                return
            busy.add(me)
            try:
                frame = getframe(1)
                marker = lines.get(frame.f_lineno) if _id(frame.f_code) in ids else None
                seen = counts.get(marker, 0)
                if marker is None or seen >= limit:
                    return
                counts[marker] = seen + 1
                try:
                    text = " ".join(str(v) for v in args[1]())
                except Exception:
                    text = ""
                if text.startswith(marker):
                    text = text[len(marker):]
                text = " ".join(text.split())[:200]
                if text:
                    line = "\\n" + vkey + ":" + marker + " " + text + "\\n"
                    write(fd, line.encode("utf-8", "replace"))
            except Exception:
                pass
            finally:
                busy.discard(me)
        return hook

    ids = frozenset(map(id, codes))
    sys.addaudithook(flusher)
    sys.addaudithook(marker_hook(codes, ids, dict(@TABLE@), key))
    sys.addaudithook(value_hook(frozenset(ids), dict(@TABLE@), vkey))
    del key, vkey
@MK@()
del @MK@
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


_AUDIT = '__import__("sys").audit'


def _emit_call(stmt: ast.Expr, marker: str) -> str:
    args = stmt.value.args  # type: ignore[attr-defined]
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
        assert marker is not None and node.end_lineno is not None and node.end_col_offset is not None
        start = src.offset(node.lineno, node.col_offset)
        end = src.offset(node.end_lineno, node.end_col_offset)
        if untrusted is None and id(node) in alone:
            edits.append((start, end, _emit_call(node, marker).encode(), marker))  # type: ignore[arg-type]
        else:
            edits.append((start, end, b"None", None))
    start, end = _prelude_at(tree, src)
    prelude = (
        _PRELUDE.replace("@MK@", mk).replace("@NONCE@", nonce).replace("@LIMIT@", str(EMIT_LIMIT))
        .replace("@TABLE@", table_token)
    )
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
    m = re.search(r"(?:^|\n)" + re.escape(nonce) + r":key ([0-9a-f]{32}) ([0-9a-f]{32})(?:\n|$)", text)
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
