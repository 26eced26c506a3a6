"""Is the execution infrastructure up? Decides when an actor pauses sampling and when it gives up.

INFRA_ERROR executions are dropped from the gradient, which is right for one broken run but
biased when the backend is down: only samples that never needed the sandbox (unparseable
responses, ``not_run``) would still reach the learner, and it would train on nothing but
failures. So, over the last ``window`` executions:

- samples that did not run are held back until an execution has got through (since the start
  or since the last pause), so they never reach the learner on their own;
- when at least ``min_outcomes`` were seen and the share of INFRA_ERROR is ``>= pause_rate``,
  the actor pauses: it admits no new generation and probes the backend every ``probe_s`` seconds;
- while paused, a successful probe (or any execution that was not INFRA_ERROR) clears the
  window and resumes sampling;
- paused for ``down_after_s`` without a success: :meth:`InfraHealth.down` is true, the actor
  stops with :data:`EXIT_INFRA_DOWN` and ``mlerl train`` stops the run with a clear error.
Pure: time is passed in, nothing is awaited.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mlerl.protocol import check

EXIT_INFRA_DOWN = 3
"""Exit status of an actor whose execution backend stayed unreachable."""


@dataclass
class InfraConfig:
    """When sampling pauses for infrastructure errors, and when the run gives up."""

    window: int = 8
    """How many recent executions are looked at."""
    min_outcomes: int = 3
    """Executions needed in the window before it can pause."""
    pause_rate: float = 0.5
    """Share of INFRA_ERROR in the window at which sampling pauses."""
    probe_s: float = 10.0
    """While paused, a trivial program is run this often to see whether the backend is back."""
    down_after_s: float = 300.0
    """Paused this long without a successful execution: the actor stops (exit 3)."""

    def __post_init__(self) -> None:
        check(self.window >= 1, "window", "must be >= 1")
        check(1 <= self.min_outcomes <= self.window, "min_outcomes", "must be in [1, window]")
        check(0 < self.pause_rate <= 1, "pause_rate", "must be in (0, 1]")
        check(self.probe_s > 0, "probe_s", "must be > 0")
        check(self.down_after_s > 0, "down_after_s", "must be > 0")


class InfraHealth:
    """The pause / resume / give-up rule of the module docstring."""

    def __init__(self, config: InfraConfig) -> None:
        self.config = config
        self._recent: deque[bool] = deque(maxlen=config.window)  # True: INFRA_ERROR
        self.paused_since: float | None = None
        self.pauses = 0
        self.confirmed = False
        """Whether an execution got through since the start or the last pause."""

    def record(self, infra_error: bool, now: float) -> None:
        """One execution's outcome (or a probe's)."""
        if not infra_error:
            self.confirmed = True
            if self.paused_since is not None:  # back: start afresh
                self._recent.clear()
                self.paused_since = None
                return
        self._recent.append(infra_error)
        if self.paused_since is None and self._should_pause():
            self.paused_since = now
            self.pauses += 1
            self.confirmed = False

    def _should_pause(self) -> bool:
        n = len(self._recent)
        return n >= self.config.min_outcomes and sum(self._recent) / n >= self.config.pause_rate

    @property
    def paused(self) -> bool:
        return self.paused_since is not None

    def down(self, now: float) -> bool:
        """Paused for ``down_after_s``: give up."""
        return self.paused_since is not None and now - self.paused_since >= self.config.down_after_s

    def reason(self, now: float) -> str:
        if self.paused_since is None:
            return ""
        return (
            f"paused: the sandbox failed {sum(self._recent)} of the last "
            f"{len(self._recent)} executions with INFRA_ERROR, "
            f"{now - self.paused_since:.0f} s ago (stop after "
            f"{self.config.down_after_s:.0f} s)"
        )
