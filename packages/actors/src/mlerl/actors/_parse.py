"""Parsing a model response into a plan and one Python program (pure, total).

The prompts ask for a short plan followed by exactly one fenced Python block. Rules, checked
in this order; the first that applies gives the :class:`mlerl.protocol.ParseStatus`:

1. ``EMPTY``: the response is blank.
2. ``TRUNCATED``: generation hit its token limit (``finish_reason == "length"``) or a code
   fence is left open. A cut-off response is never executed, even if it holds a closed block:
   the model did not finish what it was saying.
3. ``NO_CODE``: no Python block (``````python``, ``````py``, ``````python3`` or a bare ```````
   fence) with non-blank content. Blocks in other languages (``````bash``) are ignored.
4. ``MULTIPLE_BLOCKS``: more than one Python block. This is an error (the actor gives the failure
   reward and executes nothing) rather than "take the longest": the format is part of the task,
   and guessing would reward outputs the prompt forbids.
5. ``EDIT_MISMATCH`` (only with ``parent``, the code an IMPROVE prompt showed, when the block
   holds search/replace edits, see :mod:`mlerl.actors._edits`): an edit is malformed or names
   no single place in the parent (its search text is found twice or more, or found nowhere and
   neither the search nor the replacement names one line unambiguously).
6. ``SYNTAX_ERROR``: ``ast.parse`` rejects the block (including null bytes or nesting too deep),
   or, for edits, the program they produce.
7. ``UNCHANGED`` (only with ``parent``): the revised program is the parent program (the same
   syntax tree: comments and layout do not count). It is not run again: an edit that changes
   nothing would earn its parent's reward for no revision, and RL found exactly that shortcut
   (38 of 43 "valid" revisions in one run were their parent unchanged).
8. ``OK``.

A fence is a line that, after at most three spaces, starts with three backticks; a block closes
at the next line that is only backticks (at least three). ``plan`` is the text before the first
fence, stripped. Every input gives a result; nothing raises.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from mlerl.actors._edits import EditError, apply_edits, is_edit, parse_edits
from mlerl.protocol import ParseStatus

_FENCE = re.compile(r"^ {0,3}```\s*([A-Za-z0-9_+-]*)[^`]*$")
_CLOSE = re.compile(r"^ {0,3}`{3,}\s*$")
_PYTHON_TAGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class ParsedResponse:
    status: ParseStatus
    plan: str
    code: str
    """The single program when ``status`` is OK or SYNTAX_ERROR, else ``""``."""
    detail: str = ""
    """Why the status is not OK, for logs and IMPROVE prompts."""


@dataclass(frozen=True)
class _Block:
    lang: str
    body: str


def _blocks(text: str) -> tuple[list[_Block], bool, int]:
    """Fenced blocks, whether a fence is left open, and the index of the first fence line."""
    blocks: list[_Block] = []
    lines = text.splitlines()
    lang: str | None = None
    body: list[str] = []
    first = -1
    for i, line in enumerate(lines):
        if lang is None:
            m = _FENCE.match(line)
            if m:
                lang, body = m.group(1).lower(), []
                first = i if first < 0 else first
        elif _CLOSE.match(line):
            blocks.append(_Block(lang, "\n".join(body)))
            lang = None
        else:
            body.append(line)
    return blocks, lang is not None, first


def parse_response(
    text: str, finish_reason: str = "stop", parent: str | None = None
) -> ParsedResponse:
    """Split ``text`` into plan and program and classify it (see the module docstring).

    ``parent``: the previous solution's code, for an answer to an IMPROVE prompt; a block of
    search/replace edits is then applied to it and ``code`` is the whole revised program."""
    if not text.strip():
        return ParsedResponse(ParseStatus.EMPTY, "", "", "the response is empty")
    blocks, unclosed, first = _blocks(text)
    plan = "\n".join(text.splitlines()[:first]).strip() if first >= 0 else text.strip()
    if finish_reason == "length":
        return ParsedResponse(ParseStatus.TRUNCATED, plan, "", "the response hit the token limit")
    if unclosed:
        return ParsedResponse(ParseStatus.TRUNCATED, plan, "", "a code fence is never closed")
    python = [b for b in blocks if b.lang in _PYTHON_TAGS and b.body.strip()]
    if not python:
        return ParsedResponse(ParseStatus.NO_CODE, plan, "", "no python code block")
    if len(python) > 1:
        return ParsedResponse(
            ParseStatus.MULTIPLE_BLOCKS, plan, "", f"{len(python)} python code blocks, expected one"
        )
    code = python[0].body.strip("\n") + "\n"
    if parent is not None and is_edit(code):
        try:
            code = apply_edits(parent, parse_edits(code))
        except EditError as exc:
            return ParsedResponse(ParseStatus.EDIT_MISMATCH, plan, "", str(exc))
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return ParsedResponse(ParseStatus.SYNTAX_ERROR, plan, code, f"line {exc.lineno}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return ParsedResponse(
            ParseStatus.SYNTAX_ERROR, plan, code, f"unparsable: {type(exc).__name__}"
        )
    if parent is not None and _same_program(tree, parent):
        return ParsedResponse(
            ParseStatus.UNCHANGED, plan, "", "the revision leaves the previous solution unchanged"
        )
    return ParsedResponse(ParseStatus.OK, plan, code)


def _same_program(tree: ast.AST, parent: str) -> bool:
    try:
        return ast.dump(tree) == ast.dump(ast.parse(parent))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
