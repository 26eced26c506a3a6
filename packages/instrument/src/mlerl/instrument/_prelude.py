"""The secure marker channel's host side: the prelude :func:`mlerl.instrument._channel.prepare_run`
puts at the top of a program, whose audit hooks turn marker statements (calls of ``sys.audit``)
into authenticated lines on a duplicate of fd 1. Markers are bound to *where* they run, not to
what is passed:

- **Location binding.** The prelude records the program's own code objects (identity) and the
  line of every inserted marker (a table fixed at instrumentation time). The hook credits a
  ``mlerl.marker`` event only if the calling frame runs one of those code objects at a marker
  line, and credits that line's marker whatever the arguments say. Calling ``sys.audit`` from
  anywhere else, from ``exec``'d or rebuilt code, or with another stage, earns nothing; each
  marker must be alone on its line (otherwise it is dropped), so no program code shares it.
- **No reachable secret.** The nonce in the source is only a handshake: the prelude's first
  write is ``\\n<nonce>:key <K> <V>\\n`` with two keys drawn at run time from ``os.urandom``,
  and :class:`mlerl.instrument._scanner.MarkerScanner` accepts only that first line, then counts
  only ``<K>:<marker>``. Reading the nonce from the source or ``co_consts`` is useless
  afterwards. ``K`` lives only in the marker hook's closure; audit hooks cannot be listed, the
  hook never runs program code (every builtin it uses is captured at start-up), and values are
  rendered by a separate hook holding only ``V`` (display-only ``<V>:<marker> <value>`` lines,
  no credit).
- **Tamper evidence.** The marker hook watches the introspection paths that could still reach
  ``K`` or fake a marker line: ``gc.get_objects/get_referrers/get_referents``,
  ``sys._current_frames``, ``sys.settrace/setprofile`` (line jumps), ctypes raw memory reads,
  the program's own code reading ``__code__``/``f_code``/``tb_frame``/``gi_frame``..., ``exec`` of
  the program's own code objects, opening ``/proc/*/mem``, ``/proc/*/fd/*`` or ``/dev/fd/*``
  (re-reading its own stdout pipe) and writing ``.py``/``.so`` files. The first such event
  writes ``<K>:tainted <event>`` *before* the operation runs; the scanner credits nothing after
  it. The script directory is removed from ``sys.path`` (no self-written ``pandas.py``).

Each marker is written at most :data:`EMIT_LIMIT` times per run.
"""

from __future__ import annotations

EMIT_LIMIT = 100
"""Most times one marker is written per run (a marker in a hot path cannot flood the output)."""

MARKER_EVENT = "mlerl.marker"
VALUE_EVENT = "mlerl.value"
"""The audit events of a marker and of its displayed value (spelled out in the prelude too)."""


# The prelude. Placeholders: @MK@ (random name of this function), @NONCE@, @TABLE@ (one line:
# {line: marker}), @LIMIT@. The hooks use only objects captured here, before any program code
# runs, so the program cannot make them run its code (by patching a builtin, a str subclass...).
_PRELUDE = """\
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
"""


def render_prelude(name: str, nonce: str, table: str) -> str:
    """The prelude as a function ``name`` (absent from the program) that announces ``nonce``;
    ``table`` is a placeholder the caller replaces with the ``{line: marker}`` table once the
    program's final line numbers are known."""
    return (
        _PRELUDE.replace("@MK@", name)
        .replace("@NONCE@", nonce)
        .replace("@LIMIT@", str(EMIT_LIMIT))
        .replace("@TABLE@", table)
    )
