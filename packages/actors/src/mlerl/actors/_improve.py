"""The self-improvement buffer (paper section 3.3): earlier solutions to revise. Pure, no I/O.

Per task it keeps the ``recent`` most recent and the ``best`` highest-reward eligible solutions
(deduplicated by ``sample_id``). :meth:`ImprovementBuffer.choose` draws the prompt kind: with
probability ``improve_prob`` (the paper's 50/50) an IMPROVE prompt with a parent drawn uniformly
from the union of both lists, otherwise (or when the task has no eligible solution) SCRATCH.
A drawn parent is kept for ``revisions`` IMPROVE prompts in a row: their prompts are identical,
so the learner's group baseline (groups keyed by task and prompt) compares revisions of one
parent with each other. With ``revisions: 1`` (the paper) every IMPROVE prompt is unique, a
group of one, and its advantage under a group baseline is zero by construction.

Partial credit of a revision: by default a failed revision earns ``per_marker`` for each marker
it reached, as any sample (the paper). With ``credit_parent_markers: false`` it earns it only for
markers its parent did not reach (:func:`creditable_markers`): a revision that deletes a line a
parent needed, and so stops after two of the parent's markers, is then no better than one that
did not run. RL was seen teaching exactly that deletion under partial credit
(docs/experiments/credit-beyond-parent.md).

Eligible parents: by default only solutions that parsed and ran to completion (exec OK), since
the paper found small models poor at self-debugging from failed runs; ``include_failures``
admits failed runs too. Infra failures and unparsable responses are never eligible (there is
no program, or its output says nothing about the program).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mlerl.protocol import ExecStatus, ParseStatus, PromptKind, check


@dataclass(frozen=True)
class Solution:
    sample_id: str
    task_id: str
    plan: str
    code: str
    output: str
    """End of the terminal output (markers cleaned), as an IMPROVE prompt shows it."""
    reward: float
    exec_status: ExecStatus
    parse_status: ParseStatus = ParseStatus.OK
    score: float | None = None
    policy_version: int = 0
    markers: frozenset[str] = frozenset()
    """The progress markers its run reached."""


@dataclass
class ImprovementConfig:
    improve_prob: float = 0.5
    """Probability of an IMPROVE prompt when the task has an eligible parent (paper: 0.5)."""
    recent: int = 8
    """Most recent eligible solutions kept per task."""
    best: int = 4
    """Highest-reward eligible solutions kept per task."""
    include_failures: bool = False
    """Also revise programs that failed (error, timeout, OOM); the paper found this unhelpful."""
    revisions: int = 1
    """IMPROVE prompts in a row that revise the same parent (a group of revisions for the
    learner's group baseline); 1 draws a new parent every time (the paper)."""
    credit_parent_markers: bool = True
    """A revision that fails earns partial credit for every marker it reached (the paper).
    False: only for markers its parent did not reach, so breaking a parent that ran to the end
    (two markers, then a crash: -9.8) earns no more than a revision that never ran (-10)."""

    def __post_init__(self) -> None:
        check(0.0 <= self.improve_prob <= 1.0, "improve_prob", "must be in [0, 1]")
        check(self.recent >= 0 and self.best >= 0, "recent", "recent and best must be >= 0")
        check(self.revisions >= 1, "revisions", "must be >= 1")


def creditable_markers(
    markers: list[str], parent: Solution | None, credit_parent_markers: bool
) -> list[str]:
    """The markers a sample's partial credit counts: all of them, or for a revision with
    ``credit_parent_markers`` off, those its parent did not reach."""
    if parent is None or credit_parent_markers:
        return markers
    return [m for m in markers if m not in parent.markers]


@dataclass
class _TaskSolutions:
    recent: list[Solution] = field(default_factory=list)
    best: list[Solution] = field(default_factory=list)


class ImprovementBuffer:
    def __init__(self, config: ImprovementConfig | None = None) -> None:
        self.config = config or ImprovementConfig()
        self._tasks: dict[str, _TaskSolutions] = {}
        self._current: dict[str, tuple[Solution, int]] = {}
        """Per task: the parent being revised and how many more revisions it gets."""

    def eligible(self, s: Solution) -> bool:
        if s.parse_status is not ParseStatus.OK or s.exec_status in (
            ExecStatus.INFRA_ERROR,
            ExecStatus.NOT_RUN,
        ):
            return False
        return s.exec_status is ExecStatus.OK or self.config.include_failures

    def add(self, s: Solution) -> bool:
        """Record ``s``; True if it was eligible and kept."""
        if not self.eligible(s):
            return False
        entry = self._tasks.setdefault(s.task_id, _TaskSolutions())
        entry.recent = [x for x in entry.recent if x.sample_id != s.sample_id] + [s]
        entry.recent = (
            entry.recent[len(entry.recent) - self.config.recent :] if self.config.recent else []
        )
        ranked = sorted(
            [x for x in entry.best if x.sample_id != s.sample_id] + [s], key=lambda x: -x.reward
        )
        entry.best = ranked[: self.config.best]
        return True

    def candidates(self, task_id: str) -> list[Solution]:
        entry = self._tasks.get(task_id)
        if entry is None:
            return []
        seen: dict[str, Solution] = {}
        for s in entry.best + entry.recent:
            seen.setdefault(s.sample_id, s)
        return list(seen.values())

    def choose(self, task_id: str, rng: random.Random) -> tuple[PromptKind, Solution | None]:
        """The prompt kind for the next action on ``task_id`` and, for IMPROVE, the parent."""
        pool = self.candidates(task_id)
        if not pool or rng.random() >= self.config.improve_prob:
            return PromptKind.SCRATCH, None
        parent, left = self._current.get(task_id, (None, 0))
        if parent is None or left <= 0:
            parent, left = rng.choice(pool), self.config.revisions
        self._current[task_id] = (parent, left - 1)
        return PromptKind.IMPROVE, parent

    def best_of(self, task_id: str) -> Solution | None:
        entry = self._tasks.get(task_id)
        return entry.best[0] if entry and entry.best else None
