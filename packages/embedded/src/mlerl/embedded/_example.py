"""One supervised example of the bootstrap corpus (a chat prompt and the answer SFT learns)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    kind: str
    """``draft``, ``improve`` or ``instrument``."""
    task_id: str
    messages: tuple[tuple[str, str], ...]
    """(role, content) pairs of the prompt."""
    answer: str
    """The assistant turn SFT learns."""
    family: str
    correct: bool
    mistake: str | None = None
    code: str = ""
    """The program inside `answer` (draft/improve) or the uninstrumented input (instrument)."""
    parent: tuple[str, str] | None = None
    """(plan, code) of the solution an improve prompt revises."""
    measure: bool = False
    """A revision whose parent and child must be run before SFT (`measure_revisions`): its
    prompt shows no output yet and it has no `effect`."""
    effect: float | None = None
    """A measured revision's change of the printed hold-out score, positive = better."""
    hindsight: bool = False
    """The reverse of a drawn revision (its child revised back into its parent), written only
    with `BootstrapConfig.revision_hindsight`: `measure_revisions` keeps exactly one direction
    of the pair, the one that measured a help."""

    def chat(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


def _msgs(messages: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((m["role"], m["content"]) for m in messages)
