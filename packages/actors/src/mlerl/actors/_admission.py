"""Admission and staleness: a pure state machine the actor's event loop feeds and obeys.

It owns no tasks, clients or clocks: every method takes ``now`` and returns decisions.

An *action* goes GENERATING -> READY -> EXECUTING -> (SEND | DROP). Rules:

- **Admission.** At most ``capacity = ceil(oversample * max_in_flight)`` actions are alive at
  once (generating, ready or executing). ``oversample`` is the paper's m: generating more
  actions than can execute lets fast programs start while slow ones still run, and the surplus
  waits READY for an execution slot. :meth:`admit` says how many generations may start now.
- **Execution.** At most ``max_in_flight`` actions execute at once; READY actions start in
  generation order (FIFO).
- **Staleness.** An action is stale when the engine's policy version is more than
  ``max_versions_behind`` ahead of the version that generated it, or it was generated more than
  ``max_age_s`` ago (0 disables either bound). A stale READY action is dropped *before*
  execution (no compute wasted). A stale action whose execution *finished* is sent by default:
  dropping it would starve slow programs (they are the ones that turn stale while running),
  which is exactly the frequency bias the duration-aware gradient removes; the learner's
  importance correction handles its staleness. ``drop_stale_executed`` restores the dropping
  that other frameworks do (for comparison). An action that skips execution (its response did
  not parse) is judged like a finished one.
- Dropped and sent actions free their capacity at once. Sequence numbers are assigned only to
  sent samples, by the caller, so the stream stays gapless.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from mlerl.protocol import check


class Phase(enum.Enum):
    GENERATING = "generating"
    READY = "ready"
    EXECUTING = "executing"


class Verdict(enum.Enum):
    EXECUTE = "execute"
    SEND = "send"
    DROP = "drop"


@dataclass
class AdmissionConfig:
    max_in_flight: int = 2
    """Executions running at once; ``mlerl train`` refuses more than the sandbox's
    ``max_concurrency`` (the sandbox owns how many programs run at once). The default suits a
    2-core machine and fits every shipped sandbox option."""
    oversample: float = 1.5
    """The paper's m: alive actions <= ceil(m * max_in_flight); must be >= 1."""
    max_versions_behind: int = 4
    """Drop an action once the policy is this many versions newer (0: no version bound)."""
    max_age_s: float = 0.0
    """Drop an action generated longer ago than this, in seconds (0: no age bound)."""
    drop_stale_executed: bool = False
    """Also drop actions that turned stale while executing (biased against slow programs)."""

    def __post_init__(self) -> None:
        check(self.max_in_flight >= 1, "max_in_flight", "must be >= 1")
        check(self.oversample >= 1.0, "oversample", "must be >= 1")
        check(self.max_versions_behind >= 0, "max_versions_behind", "must be >= 0")
        check(self.max_age_s >= 0, "max_age_s", "must be >= 0")

    @property
    def capacity(self) -> int:
        return math.ceil(self.oversample * self.max_in_flight - 1e-9)


@dataclass
class _Action:
    phase: Phase
    version: int = -1
    t_generated: float = 0.0


@dataclass
class Admission:
    config: AdmissionConfig
    version: int = 0
    """The engine's current policy version."""
    _actions: dict[int, _Action] = field(default_factory=dict)
    _next_id: int = 0
    stats: dict[str, int] = field(
        default_factory=lambda: {"admitted": 0, "sent": 0, "dropped_ready": 0, "dropped_done": 0}
    )

    def count(self, phase: Phase) -> int:
        return sum(1 for a in self._actions.values() if a.phase is phase)

    @property
    def alive(self) -> int:
        return len(self._actions)

    def on_version(self, version: int) -> None:
        self.version = max(self.version, version)

    def admit(self) -> list[int]:
        """Start as many generations as capacity allows; their action ids."""
        free = self.config.capacity - len(self._actions)
        ids = list(range(self._next_id, self._next_id + max(free, 0)))
        for i in ids:
            self._actions[i] = _Action(Phase.GENERATING)
        self._next_id += len(ids)
        self.stats["admitted"] += len(ids)
        return ids

    def is_stale(self, action_id: int, now: float) -> bool:
        a = self._actions[action_id]
        behind = self.config.max_versions_behind
        too_old = self.config.max_age_s > 0 and now - a.t_generated > self.config.max_age_s
        return (behind > 0 and self.version - a.version > behind) or too_old

    def on_generated(self, action_id: int, version: int, now: float) -> None:
        a = self._get(action_id, Phase.GENERATING)
        a.phase, a.version, a.t_generated = Phase.READY, version, now

    def schedule(self, now: float) -> list[tuple[int, Verdict]]:
        """Decide READY actions in FIFO order: DROP if stale, EXECUTE while slots are free."""
        out: list[tuple[int, Verdict]] = []
        running = self.count(Phase.EXECUTING)
        for aid in [i for i, a in self._actions.items() if a.phase is Phase.READY]:
            if self.is_stale(aid, now):
                del self._actions[aid]
                self.stats["dropped_ready"] += 1
                out.append((aid, Verdict.DROP))
            elif running < self.config.max_in_flight:
                self._actions[aid].phase = Phase.EXECUTING
                running += 1
                out.append((aid, Verdict.EXECUTE))
        return out

    def on_finished(self, action_id: int, now: float) -> Verdict:
        """The action's execution ended (or it had nothing to execute): SEND or DROP."""
        a = self._actions.get(action_id)
        if a is None or a.phase is Phase.GENERATING:
            raise KeyError(f"action {action_id} is not ready or executing")
        stale = self.config.drop_stale_executed and self.is_stale(action_id, now)
        verdict = Verdict.DROP if stale else Verdict.SEND
        del self._actions[action_id]
        self.stats["dropped_done" if verdict is Verdict.DROP else "sent"] += 1
        return verdict

    def on_failed(self, action_id: int) -> None:
        """The action ended without a sample (generation failed, infra error): free it."""
        self._actions.pop(action_id, None)

    def next_deadline(self) -> float | None:
        """The earliest time a READY action turns stale by age (to wake the loop), if any."""
        if self.config.max_age_s <= 0:
            return None
        ready = [a.t_generated for a in self._actions.values() if a.phase is Phase.READY]
        return min(ready) + self.config.max_age_s if ready else None

    def _get(self, action_id: int, phase: Phase) -> _Action:
        a = self._actions.get(action_id)
        if a is None or a.phase is not phase:
            raise KeyError(f"action {action_id} is not {phase.value}")
        return a
