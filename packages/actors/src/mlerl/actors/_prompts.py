"""The paper's two prompts (appendix C.1 and C.2) as ChatMessage lists. Pure functions.

- :func:`scratch_prompt` (C.1): solve the task from its description, the public file names, the
  submission format and a short snippet of the data.
- :func:`improve_prompt` (C.2): revise an earlier solution, shown with its plan, code and the
  end of its terminal output (which carries the instrumentation markers, e.g. losses).

Differences from the paper, kept small on purpose: data lives at ``./input/`` (mlerl's program
contract) instead of ``/workdir/<task>/prepared/public/``; the IMPROVE prompt repeats the task
description (bounded), since our tasks are not fixed per run; every free-text part is bounded
(``PromptConfig``) so prompts fit the model's context.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mlerl.protocol import ChatMessage, check

SYSTEM = (
    "You are given a machine learning task. You must solve the task by training a model and "
    "running the model on the test set to produce a submission file."
)
FORMAT = (
    "First outline your proposed solution in natural language (3-5 sentences), followed by a "
    "single markdown code block (wrapped in ```) which implements this solution."
)
EDIT_FORMAT = (
    "First say in natural language (1-3 sentences) what you will change and why, followed by a "
    "single markdown code block (wrapped in ```) that holds one or more edits of the previous "
    "solution, each written as\n<<<<<<< SEARCH\n(lines copied exactly from the previous "
    "solution)\n=======\n(the lines that replace them)\n>>>>>>> REPLACE\nA block with a whole "
    "new program is also accepted."
)
IMPROVE_FORMATS = ("rewrite", "edit")
PACKAGES = "`pandas`, `numpy`, `scikit-learn`, `scipy`, `lightgbm`, `torch`"


class TaskLike(Protocol):
    """What the prompts need from :class:`mlerl.bench.TaskSpec`."""

    @property
    def id(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def public_dir(self) -> Path: ...

    @property
    def submission_columns(self) -> tuple[str, ...]: ...


@dataclass
class PromptConfig:
    description_chars: int = 3000
    """Longest task description shown; longer ones are cut with a marker."""
    snippet_chars: int = 1200
    """Characters of the data snippet (the head of one public file)."""
    code_chars: int = 8000
    """Longest previous solution (plan + code) shown in an IMPROVE prompt."""
    output_chars: int = 2000
    """Characters of terminal output (its end) shown in an IMPROVE prompt."""
    packages: str = PACKAGES
    """The 'pre-installed packages' line."""
    improve_format: str = "rewrite"
    """How an IMPROVE answer revises: ``rewrite`` (the paper's C.2: a plan and the whole new
    program) or ``edit`` (a short reason and search/replace edits the actor applies to the
    previous program, as code-editing agents do; a whole program is accepted too;
    ``+experiment=edit_revisions``). The embedded 4 M-parameter policy did not learn to
    rewrite a program it had not seen; with edits more of its revisions run, none better than
    its parent (docs/experiments/edit-revisions.md)."""

    def __post_init__(self) -> None:
        for key in ("description_chars", "snippet_chars", "code_chars", "output_chars"):
            check(getattr(self, key) >= 0, key, "must be >= 0")
        check(
            self.improve_format in IMPROVE_FORMATS,
            "improve_format",
            f"must be one of {IMPROVE_FORMATS}",
        )


def clip_head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... truncated ...]"


def clip_tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return "[... truncated ...]\n" + (text[len(text) - limit :] if limit else "")


def public_files(public_dir: Path) -> list[str]:
    """Names of the public files (directories shown with a trailing slash), sorted."""
    if not public_dir.is_dir():
        return []
    return sorted(p.name + ("/" if p.is_dir() else "") for p in public_dir.iterdir())


def data_snippet(public_dir: Path, limit: int) -> str:
    """The head of the test file (else the first text file): ``-> ./input/NAME:`` + text."""
    files = [p for p in sorted(public_dir.glob("*")) if p.is_file()] if public_dir.is_dir() else []
    text_files = [p for p in files if p.suffix in (".csv", ".json", ".txt", ".tsv", ".jsonl")]
    preferred = [p for p in text_files if p.stem.startswith("test")] + text_files
    if not preferred or limit <= 0:
        return ""
    path = preferred[0]
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(limit + 1)
    more = " ..." if len(head) > limit or os.path.getsize(path) > limit else ""
    return f"-> ./input/{path.name}:\n{head[:limit]}{more}"


def _format_example(task: TaskLike) -> str:
    sample = task.public_dir / "sample_submission.csv"
    if sample.is_file():
        with open(sample, encoding="utf-8", errors="replace") as fh:
            lines = [fh.readline().rstrip("\n") for _ in range(3)]
        return " ".join(line for line in lines if line) + " etc."
    return ",".join(task.submission_columns)


def scratch_prompt(task: TaskLike, config: PromptConfig) -> list[ChatMessage]:
    """Appendix C.1: solve ``task`` from scratch."""
    files = ", ".join(public_files(task.public_dir)) or "(none)"
    snippet = data_snippet(task.public_dir, config.snippet_chars)
    user = (
        f"{FORMAT} Note:\n\n"
        f"- Datasets {files} are available in `./input/`.\n"
        "- You MUST produce a submission file at `./submission.csv` by running your model on "
        "the test split.\n\n"
        f"{clip_head(task.description.strip(), config.description_chars)}\n\n"
        f"- You can use pre-installed packages such as: {config.packages}.\n"
        "- You can't access the internet so don't use any pre-trained models needing downloading.\n"
        f"- `./submission.csv` should have the following format: {_format_example(task)}\n"
    )
    if snippet:
        user += f"\nData snippet: {snippet}\n"
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=user)]


def improve_prompt(
    task: TaskLike, plan: str, code: str, output: str, config: PromptConfig
) -> list[ChatMessage]:
    """Appendix C.2: revise the previous solution ``plan`` + ``code`` given its ``output``."""
    previous = clip_head(f"{plan.strip()}\n\n```python\n{code.rstrip()}\n```", config.code_chars)
    how = (
        f"{EDIT_FORMAT}"
        if config.improve_format == "edit"
        else f"{FORMAT} If you reuse parts of the example code, include those sections again in "
        "your final solution."
    )
    user = (
        "You have implemented a previous solution. Revise the solution to improve the performance "
        f"on the test set. {how} The data is in `./input/`; write `./submission.csv`.\n\n"
        f"Task: {clip_head(task.description.strip(), config.description_chars)}\n\n"
        f"Previous solution:\n{previous}\n\n"
        f"Terminal output of the previous solution:\n```\n"
        f"{clip_tail(output.strip(), config.output_chars)}\n```\n"
    )
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=user)]


def chat_prompt_ids(tokenizer: Any, conversation: Sequence[ChatMessage]) -> list[int]:
    """Prompt token ids for an engine: the chat template with the assistant turn opened."""
    enc = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in conversation],
        add_generation_prompt=True,
        tokenize=True,
    )
    return list(enc["input_ids"])
