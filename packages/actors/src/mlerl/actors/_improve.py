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

Parent choice (``parent_choice``): ``uniform`` (the paper's, above) or ``puct``, which keeps an
archive of up to ``archive`` eligible solutions per task and picks the one with the highest
PUCT score (:func:`puct_scores`), as TTT-Discover chooses which state to continue from:

    score(s) = Q(s) + c * P(s) * sqrt(1 + T) / (1 + n(s))

Q(s) is the best reward among the revisions of s and of their descendants (its own reward while
it has none), min-max normalised over the archive; P(s) a prior by the rank of s's own reward
(rank / sum of ranks, the best highest); n(s) how often s was chosen, T the task's total. A
discovery whose revisions score is revised again; a parent whose revisions all fail (Q = -10)
falls back; the bonus keeps trying the rest. Every ``add`` and every choice is reported to the
``record`` callback as a small event, and :meth:`ImprovementBuffer.replay` rebuilds the same
state from them, so the actor keeps the archive across a restart (``parents.jsonl``).

Eligible parents: by default only solutions that parsed and ran to completion (exec OK), since
the paper found small models poor at self-debugging from failed runs; ``include_failures``
admits failed runs too. Infra failures and unparsable responses are never eligible (there is
no program, or its output says nothing about the program).
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    parent_id: str | None = None
    """The solution this one revised (IMPROVE), else None."""

    def to_event(self) -> dict[str, Any]:
        """This solution as a JSON-able ``add`` event (:meth:`ImprovementBuffer.replay`)."""
        return {
            "event": "add",
            "sample_id": self.sample_id,
            "task_id": self.task_id,
            "plan": self.plan,
            "code": self.code,
            "output": self.output,
            "reward": self.reward,
            "exec_status": self.exec_status.value,
            "parse_status": self.parse_status.value,
            "score": self.score,
            "policy_version": self.policy_version,
            "markers": sorted(self.markers),
            "parent_id": self.parent_id,
        }

    @classmethod
    def from_event(cls, e: dict[str, Any]) -> Solution:
        return cls(
            sample_id=e["sample_id"],
            task_id=e["task_id"],
            plan=e["plan"],
            code=e["code"],
            output=e["output"],
            reward=float(e["reward"]),
            exec_status=ExecStatus(e["exec_status"]),
            parse_status=ParseStatus(e["parse_status"]),
            score=e["score"],
            policy_version=int(e["policy_version"]),
            markers=frozenset(e["markers"]),
            parent_id=e.get("parent_id"),
        )


class ParentChoice(str, enum.Enum):
    uniform = "uniform"
    """Uniform over the task's recent and best solutions (the paper)."""
    puct = "puct"
    """The archive solution with the highest PUCT score (best-descendant value, rank prior)."""


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
    parent_choice: ParentChoice = ParentChoice.uniform
    """How an IMPROVE prompt's parent is chosen (see the module docstring)."""
    puct_c: float = 1.0
    """Exploration constant of ``puct``."""
    archive: int = 64
    """Eligible solutions ``puct`` keeps per task (beyond it the lowest own reward goes)."""
    credit_parent_markers: bool = True
    """A revision that fails earns partial credit for every marker it reached (the paper).
    False: only for markers its parent did not reach, so breaking a parent that ran to the end
    (two markers, then a crash: -9.8) earns no more than a revision that never ran (-10)."""

    def __post_init__(self) -> None:
        try:
            self.parent_choice = ParentChoice(self.parent_choice)
        except ValueError:
            choices = ", ".join(c.value for c in ParentChoice)
            check(False, "parent_choice", f"unknown value {self.parent_choice!r}; choose {choices}")
        check(math.isfinite(self.puct_c) and self.puct_c >= 0, "puct_c", "must be finite and >= 0")
        check(self.archive >= 1, "archive", "must be >= 1")
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


@dataclass
class _Node:
    solution: Solution
    visits: int = 0
    best_descendant: float | None = None
    """The best reward among its revisions and their descendants (None: not revised yet)."""


def puct_scores(
    rewards: list[float], values: list[float | None], visits: list[int], c: float
) -> list[float]:
    """PUCT scores of archive states: Q + c * P * sqrt(1 + T) / (1 + n), with Q each state's
    value (its best descendant's reward, else its own) min-max normalised over the archive (all
    0 when they are equal), P its own reward's rank over the sum of ranks (ties share the mean
    rank) and T the sum of visits."""
    q = [r if v is None else v for r, v in zip(rewards, values, strict=True)]
    lo, hi = min(q), max(q)
    qn = [0.0 if hi == lo else (x - lo) / (hi - lo) for x in q]
    order = sorted(range(len(rewards)), key=lambda i: rewards[i])
    ranks = [0.0] * len(rewards)
    i = 0
    while i < len(order):  # ranks 1..n from the worst, ties averaged
        j = i
        while j + 1 < len(order) and rewards[order[j + 1]] == rewards[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    total = sum(ranks)
    bonus = c * math.sqrt(1 + sum(visits))
    return [qn[i] + bonus * (ranks[i] / total) / (1 + visits[i]) for i in range(len(rewards))]


class ImprovementBuffer:
    def __init__(
        self,
        config: ImprovementConfig | None = None,
        record: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config or ImprovementConfig()
        self._record = record
        """Called with each event (an ``add`` of a solution, a ``choose`` of a parent)."""
        self._tasks: dict[str, _TaskSolutions] = {}
        self._archive: dict[str, dict[str, _Node]] = {}
        """Per task, sample id -> node (``puct``); every solution added with its parent's id."""
        self._parent_of: dict[str, str] = {}
        self._current: dict[str, tuple[Solution, int]] = {}
        """Per task: the parent being revised and how many more revisions it gets."""

    def eligible(self, s: Solution) -> bool:
        if s.parse_status is not ParseStatus.OK or s.exec_status in (
            ExecStatus.INFRA_ERROR,
            ExecStatus.NOT_RUN,
        ):
            return False
        return s.exec_status is ExecStatus.OK or self.config.include_failures

    def replay(self, events: list[dict[str, Any]]) -> int:
        """Rebuild the state the ``record``-ed events describe (an actor's restart); returns how
        many events were malformed and skipped (a hand-edited or foreign file)."""
        record, self._record = self._record, None
        skipped = 0
        try:
            for e in events:
                try:
                    if e.get("event") == "add":
                        self.add(Solution.from_event(e))
                    elif e.get("event") == "choose":
                        node = self._archive.get(e["task_id"], {}).get(e["sample_id"])
                        if node is not None:
                            node.visits += 1
                    else:
                        skipped += 1
                except (KeyError, ValueError, TypeError, AttributeError):
                    skipped += 1
        finally:
            self._record = record
        return skipped

    def add(self, s: Solution) -> bool:
        """Record ``s``; True if it was eligible and kept."""
        if self._record is not None:
            self._record(s.to_event())
        self._credit_ancestors(s)
        if not self.eligible(s):
            return False
        if s.parent_id is not None:
            self._parent_of[s.sample_id] = s.parent_id
        nodes = self._archive.setdefault(s.task_id, {})
        nodes.setdefault(s.sample_id, _Node(s))
        if len(nodes) > self.config.archive:
            worst = min(nodes.values(), key=lambda n: n.solution.reward)
            del nodes[worst.solution.sample_id]
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

    def _credit_ancestors(self, s: Solution) -> None:
        """``s``'s reward is the best descendant of its parent and their ancestors, if better."""
        nodes = self._archive.get(s.task_id, {})
        seen: set[str] = set()
        parent = s.parent_id
        while parent is not None and parent not in seen:
            seen.add(parent)
            node = nodes.get(parent)
            if node is not None and (
                node.best_descendant is None or s.reward > node.best_descendant
            ):
                node.best_descendant = s.reward
            parent = self._parent_of.get(parent)

    def archived(self, task_id: str) -> list[tuple[Solution, int, float | None]]:
        """The ``puct`` archive of ``task_id``: (solution, times chosen, best descendant)."""
        return [
            (n.solution, n.visits, n.best_descendant)
            for n in self._archive.get(task_id, {}).values()
        ]

    def _puct(self, task_id: str) -> Solution | None:
        nodes = list(self._archive.get(task_id, {}).values())
        if not nodes:
            return None
        scores = puct_scores(
            [n.solution.reward for n in nodes],
            [n.best_descendant for n in nodes],
            [n.visits for n in nodes],
            self.config.puct_c,
        )
        top = max(scores)
        node = next(n for n, sc in zip(nodes, scores, strict=True) if sc == top)
        node.visits += 1
        if self._record is not None:
            self._record(
                {"event": "choose", "task_id": task_id, "sample_id": node.solution.sample_id}
            )
        return node.solution

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
            chosen = self._puct(task_id) if self.config.parent_choice is ParentChoice.puct else None
            parent, left = chosen or rng.choice(pool), self.config.revisions
        self._current[task_id] = (parent, left - 1)
        return PromptKind.IMPROVE, parent

    def best_of(self, task_id: str) -> Solution | None:
        entry = self._tasks.get(task_id)
        return entry.best[0] if entry and entry.best else None
