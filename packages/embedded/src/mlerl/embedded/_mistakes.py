"""Realistic bugs injected into a minority of corpus programs, with the output they produce.

Each mistake edits one chunk of a correct program. Crashing mistakes come with the terminal
output Python would print (the traceback's last frame and the exception line), which the
improve examples show to the policy; silent mistakes (`no_proba`, `index`) run and yield a
worse or invalid submission, and carry an empty `error`.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from mlerl.embedded._programs import _NAMES, Choices, Program
from mlerl.embedded._tasks import TaskView


def _traceback(code: str, needle: str, exc: str) -> str:
    for number, line in enumerate(code.splitlines(), start=1):
        if needle in line:
            return (
                f'Traceback (most recent call last):\n  File "main.py", line {number}, in '
                "<module>\n"
                f"    {line.strip()}\n{exc}"
            )
    return exc


def _edit(chunks: list, index: int, old: str, new: str, count: int = 1) -> bool:
    text, markers = chunks[index]
    if old not in text:
        return False
    chunks[index] = (text.replace(old, new, count), markers)
    return True


def _find(chunks: list, needle: str) -> int | None:
    return next((i for i, (text, _) in enumerate(chunks) if needle in text), None)


def with_mistake(
    program: Program, view: TaskView, mistake: str | None, rng: random.Random
) -> Program:
    """`program` with `mistake` (one of MISTAKES) injected; unchanged when `mistake` is None or
    does not apply to it."""
    if mistake is None:
        return program
    bad = inject(program, view, mistake, rng)
    return bad if bad is not None else program


def inject(program: Program, view: TaskView, mistake: str, rng: random.Random) -> Program | None:
    """`program` with `mistake` injected, or None when that mistake does not apply to it (and to
    every settings-block program: its bugs are not simulated)."""
    if not isinstance(program.choices, Choices):
        return None
    n = _NAMES[program.choices.names]
    chunks = list(program.chunks)
    error, needle = "", ""
    if mistake == "missing_import":
        if not program.choices.model.imports:
            return None
        line = program.choices.model.imports[0]
        name = line.split()[-1]
        if not _edit(chunks, 0, line + "\n", "") and not _edit(chunks, 0, "\n" + line, ""):
            return None
        needle, error = f"{name}", f"NameError: name '{name}' is not defined"
        code = "\n".join(t for t, _ in chunks)
        needle = next(
            (ln for ln in code.splitlines() if re.search(rf"\b{re.escape(name)}\b", ln)), name
        )
    elif mistake == "wrong_path":
        wrong = rng.choice(
            ["train.csv", "../input/train.csv", "data/train.csv", "/input/train.csv"]
        )
        i = _find(chunks, "pd.read_csv(")
        if i is None:  # a program that reads no CSV: this mistake does not apply
            return None
        text, markers = chunks[i]
        _, rest = text.split("\n", 1)
        needle = f'{n["train"]} = pd.read_csv("{wrong}")'
        chunks[i] = (needle + "\n" + rest, markers)
        error = f"FileNotFoundError: [Errno 2] No such file or directory: '{wrong}'"
    elif mistake == "wrong_column":
        bad = [
            c
            for c in ("label", "target", "y", "class", "Target", "outcome")
            if c not in (view.label_column, view.id_column, *view.target_columns)
        ]
        wrong = rng.choice(bad)
        y_line = f"{n['y']} = {n['train']}["
        i = _find(chunks, y_line)
        if i is None:
            return None
        text, markers = chunks[i]
        needle = f'{y_line}"{wrong}"]'
        chunks[i] = (re.sub(re.escape(y_line) + r"[^\]]+\]", needle, text, count=1), markers)
        error = f"KeyError: '{wrong}'"
    elif mistake == "typo":
        typo = rng.choice(["X_tst", "Xtest", "test_X", "X_te"])
        old = f"({n['Xt']})"
        i = _find(chunks, f".predict_proba{old}") or _find(chunks, f".predict{old}")
        if i is None or typo == n["Xt"]:
            return None
        _edit(chunks, i, old, f"({typo})")
        needle, error = f"({typo})", f"NameError: name '{typo}' is not defined"
    elif mistake == "no_proba":
        old = f".predict_proba({n['Xt']})[:, 1]"
        i = _find(chunks, old)
        if view.problem != "binary" or i is None:
            return None
        _edit(chunks, i, old, f".predict({n['Xt']})")
    elif mistake == "index":
        if not _edit(chunks, len(chunks) - 1, ", index=False)", ")"):
            return None
    else:
        raise ValueError(f"unknown mistake {mistake!r}")
    bad_program = replace(program, chunks=tuple(chunks), mistake=mistake)
    if needle:
        error = _traceback(bad_program.code, needle, error)
    return replace(bad_program, error=error)
