"""What the AST can prove about a program: import provenance and introspection.

Two uses:

- :func:`imports` resolves names bound by imports (``import pandas as pd`` -> ``pd`` is
  ``pandas``; ``from sklearn.ensemble import RandomForestClassifier``) so placement rules credit a
  stage only when the call really is the library's (:mod:`mlerl.instrument._context`). A name that
  is bound in any other way anywhere in the program (assigned, a parameter, a ``def``, a loop
  target, imported twice from different places) is not resolved: ``pd = Fake()`` makes every
  ``pd.read_csv`` untrusted.
- :func:`untrusted_reason` flags programs whose markers cannot be trusted: they reach for the
  interpreter's internals (``globals()``, ``gc``, ``inspect``, ``ctypes``, frames, code objects,
  closures, ``sys.modules``, ``exec``/``eval``, dynamic ``getattr``, ``/proc/...``) or monkeypatch
  library objects (``pd.read_csv = ...``, ``model.fit = ...``). :func:`mlerl.instrument.prepare_run`
  drops all markers of such a program: it runs normally and is graded normally, but earns no
  partial credit. Honest ML programs almost never need these constructs; the cost of a false
  positive is at most the partial credit (0.7) of a failed run.
"""

from __future__ import annotations

import ast

INTROSPECTION_MODULES = frozenset(
    [
        "gc",
        "inspect",
        "ctypes",
        "_ctypes",
        "cffi",
        "importlib",
        "builtins",
        "__builtin__",
        "dis",
        "marshal",
        "code",
        "codeop",
        "runpy",
        "pdb",
        "bdb",
        "trace",
        "_testcapi",
        "_xxsubinterpreters",
    ]
)
DANGER_ATTRS = frozenset(
    [
        "f_back",
        "f_code",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_lineno",
        "f_lasti",
        "f_trace",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "__code__",
        "__closure__",
        "__globals__",
        "__builtins__",
        "__dict__",
        "__subclasses__",
        "__import__",
        "__loader__",
        "__spec__",
        "__defaults__",
        "__kwdefaults__",
        "__reduce__",
        "__reduce_ex__",
        "__setstate__",
        "co_consts",
        "co_code",
        "co_names",
        "cell_contents",
        "_getframe",
        "_current_frames",
        "_current_exceptions",
        "settrace",
        "setprofile",
        "gettrace",
        "addaudithook",
        "FunctionType",
        "CodeType",
        "FrameType",
        "CellType",
    ]
)
SYS_ATTRS = frozenset(["modules", "meta_path", "path_hooks", "path_importer_cache"])
"""Dangerous only on ``sys`` (``model.modules()`` is an ordinary torch method)."""
DANGER_NAMES = frozenset(
    [
        "globals",
        "locals",
        "vars",
        "exec",
        "eval",
        "compile",
        "__import__",
        "breakpoint",
        "__builtins__",
        "__loader__",
        "__spec__",
    ]
)
STAGE_METHODS = frozenset(
    [
        "fit",
        "partial_fit",
        "predict",
        "predict_proba",
        "predict_log_proba",
        "decision_function",
        "score",
        "evaluate",
        "train",
        "train_on_batch",
        "fit_generator",
        "backward",
        "read_csv",
        "read_parquet",
        "read_json",
        "load",
        "step",
    ]
)
"""Attributes whose replacement (``model.fit = lambda *a: None``) would fake a stage."""
_CONFIG_PARTS = frozenset(
    [
        "options",
        "backends",
        "config",
        "rcParams",
        "flags",
        "environ",
        "defaults",
        "display",
        "mode",
        "cudnn",
        "cuda",
        "matmul",
        "stdout",
        "stderr",
    ]
)
_DANGER_MODULE_STRINGS = frozenset({"gc", "inspect", "ctypes", "_ctypes", "importlib", "builtins"})
"""Module names flagged as string constants (``"code"``/``"trace"`` are common column names)."""
_DYNAMIC_ATTR_CALLS = frozenset({"getattr", "setattr", "delattr", "hasattr"})


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _chain(node: ast.expr) -> list[str]:
    out = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    return out


def bindings(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """Every node that binds each name, anywhere in the program (scopes merged: conservative)."""
    out: dict[str, list[ast.AST]] = {}

    def add(name: str, node: ast.AST) -> None:
        out.setdefault(name, []).append(node)

    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            add(n.id, n)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            add(n.name, n)
        elif isinstance(n, ast.arg):
            add(n.arg, n)
        elif isinstance(n, ast.alias):
            add((n.asname or n.name).split(".")[0], n)
        elif (isinstance(n, ast.ExceptHandler) and n.name) or (
            isinstance(n, ast.MatchAs | ast.MatchStar) and n.name
        ):
            add(n.name, n)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            for name in n.names:
                add(name, n)
    return out


def imports(tree: ast.AST) -> dict[str, str]:
    """``{local name: qualified name}`` for names bound only by (consistent) imports."""
    found: dict[str, set[str]] = {}
    alias_nodes: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                alias_nodes.add(id(a))
                local = a.asname or a.name.split(".")[0]
                found.setdefault(local, set()).add(a.name if a.asname else a.name.split(".")[0])
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            for a in n.names:
                alias_nodes.add(id(a))
                if a.name != "*":
                    found.setdefault(a.asname or a.name, set()).add(f"{n.module}.{a.name}")
    binds = bindings(tree)
    out = {}
    for name, targets in found.items():
        if len(targets) == 1 and all(id(b) in alias_nodes for b in binds.get(name, [])):
            out[name] = next(iter(targets))
    return out


def qualified(node: ast.expr, imported: dict[str, str]) -> str | None:
    """``pd.read_csv`` -> ``pandas.read_csv`` when ``pd`` is a resolved import, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return None
    return ".".join([imported[node.id], *reversed(parts)])


def untrusted_reason(tree: ast.AST) -> str | None:
    """Why the program's markers cannot be trusted (introspection, monkeypatching), or None."""
    import_bound = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    sys_names = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
        if a.name == "sys"
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Import | ast.ImportFrom):
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            for mod in mods:
                if mod.split(".")[0] in INTROSPECTION_MODULES:
                    return f"imports {mod}"
            if isinstance(n, ast.ImportFrom) and n.module == "sys":
                for a in n.names:
                    if a.name in DANGER_ATTRS | SYS_ATTRS or a.name == "*":
                        return f"imports sys.{a.name}"
        elif isinstance(n, ast.Attribute):
            if n.attr in DANGER_ATTRS:
                return f"uses .{n.attr}"
            if n.attr in SYS_ATTRS and _root_name(n.value) in sys_names:
                return f"uses sys.{n.attr}"
            if isinstance(n.ctx, ast.Store | ast.Del):
                if n.attr in STAGE_METHODS:
                    return f"replaces .{n.attr}"
                root = _root_name(n.value)
                if root in import_bound and not _CONFIG_PARTS & set(_chain(n)):
                    return f"monkeypatches {root}.{'.'.join(reversed(_chain(n)))}"
        elif isinstance(n, ast.Name) and n.id in DANGER_NAMES:
            return f"uses {n.id}"
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            if n.value in DANGER_ATTRS or n.value in _DANGER_MODULE_STRINGS:
                return f"names {n.value!r}"
            if "/proc/" in n.value or "/dev/fd" in n.value:
                return f"names {n.value!r}"
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in _DYNAMIC_ATTR_CALLS
        ):
            attr = n.args[1] if len(n.args) > 1 else None
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                return f"dynamic {n.func.id}"
            if n.func.id in ("setattr", "delattr"):
                target = _root_name(n.args[0])
                if attr.value in STAGE_METHODS or target in import_bound:
                    return f"{n.func.id} {attr.value!r}"
    return None
