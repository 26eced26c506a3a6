"""The actor's pipeline: from a generated program to a graded, rewarded sample.

:class:`Pipeline` is the interface the actor calls (six methods), so tests swap in a fake
(``mlerl.actors._fakes.FakePipeline``) and the other packages' APIs are named in exactly one
place, :class:`RealPipeline`:

- ``prepare`` (async): ``instrument_ast``, or with an ``LMInstrumenter`` the frozen LM's
  verified insertion (AST fallback, done inside mlerl.instrument), then ``prepare_run`` (secure
  nonce channel or paper prints). Code the AST instrumenter cannot handle runs uninstrumented
  (no markers, no partial credit).
- ``scanner``: a streaming ``MarkerScanner`` fed with stdout chunks as they arrive.
- ``grade``: a ``GraderPool`` (warm child processes with a timeout and a memory cap), outside
  the sandbox; ``close`` ends its children.
- ``reward``: ``compute_reward`` on the public score, with the task's reference scores
  (``mlerl.bench``'s ``reference_scores``: the sample submission's public score and the
  metric's best value); None for INFRA_ERROR (never rewarded).
- ``clean``: ``clean_output``, turning nonce lines back into what the paper's prompts show.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mlerl.protocol import ExecStatus

if TYPE_CHECKING:  # imported where used: mlerl.bench imports pandas, the LM path torch
    from mlerl.actors._config import ActorsConfig
    from mlerl.bench import TaskSpec
    from mlerl.instrument import InstrumentConfig, LMInstrumenter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    program: str
    nonce: str | None


@dataclass(frozen=True)
class Graded:
    score: float | None
    """The public leaderboard's score: what the reward and every selection read."""
    valid: bool
    error: str = ""
    private_score: float | None = None
    """The private leaderboard's score: what reports show."""
    baseline: float | None = None
    """The task's sample submission's public score (the normalised reward's reference)."""


class Scanner(Protocol):
    def feed(self, chunk: bytes | str) -> None: ...

    def close(self) -> list[str]: ...


class Pipeline(Protocol):
    """What the actor calls between a generated program and its sample (the module docstring)."""

    async def prepare(self, code: str) -> Prepared:
        """The program that runs: ``code`` instrumented, with its marker channel."""
        ...

    def scanner(self, nonce: str | None) -> Scanner:
        """A fresh marker scanner for one execution's stdout."""
        ...

    def grade(self, task: TaskSpec, path: Path) -> Graded:
        """The submission at ``path`` graded for ``task``; blocking, the actor runs it in a
        thread."""
        ...

    def reward(
        self, markers: list[str], status: ExecStatus, graded: Graded, task: TaskSpec
    ) -> tuple[float | None, dict[str, float]]:
        """(reward or None when never rewarded, its parts)."""
        ...

    def clean(self, text: str, nonce: str | None) -> str:
        """The terminal output as the prompts show it."""
        ...

    def close(self) -> None:
        """Release what the pipeline holds (grading processes); idempotent."""
        ...


class RealPipeline:
    """The real adapters for an actor with ``config`` (an ``ActorsConfig``; default one) and the
    run's ``instrument`` section (an ``mlerl.instrument.InstrumentConfig``: marker mode and
    reward constants; default one). ``lm_instrumenter`` (an ``LMInstrumenter``) switches to LM
    mode. Every setting is read from those two configs, its one owner.

    One grading process per execution slot (``admission.max_in_flight``: each holds its slot
    while grading), started here, when the run starts, so that no grade pays a child's
    interpreter start and pandas import, and replaced as soon as one retires or dies;
    :meth:`close` ends them. The grade timeout is ``grade_timeout_s``.
    """

    def __init__(
        self,
        config: ActorsConfig | None = None,
        instrument: InstrumentConfig | None = None,
        lm_instrumenter: LMInstrumenter | None = None,
    ) -> None:
        from mlerl.actors._config import ActorsConfig
        from mlerl.bench import GraderPool
        from mlerl.instrument import InstrumentConfig

        config = config or ActorsConfig()
        instrument = instrument or InstrumentConfig()
        self._markers, self._reward_config = instrument.markers.value, instrument.reward
        self._lm = lm_instrumenter
        self._graders = GraderPool(
            size=config.admission.max_in_flight, timeout_s=config.grade_timeout_s
        )
        self._graders.warm()

    async def prepare(self, code: str) -> Prepared:
        from mlerl.instrument import instrument_ast, prepare_run

        try:
            if self._lm is not None:
                instrumented = (await self._lm.instrument(code)).code
            else:
                instrumented = instrument_ast(code)
        except (SyntaxError, ValueError, RecursionError) as exc:
            log.warning("instrumentation failed (%s); running the program uninstrumented", exc)
            return Prepared(code, None)
        run = prepare_run(instrumented, self._markers)
        return Prepared(run.program, run.nonce)

    def scanner(self, nonce: str | None) -> Scanner:
        from mlerl.instrument import MarkerScanner

        return MarkerScanner(nonce)

    def grade(self, task: TaskSpec, path: Path) -> Graded:
        report = self._graders.grade(task, path)
        return Graded(
            report.public_score,
            bool(report.valid_submission),
            report.error,
            report.private_score,
            report.baseline_score,
        )

    def reward(
        self, markers: list[str], status: ExecStatus, graded: Graded, task: TaskSpec
    ) -> tuple[float | None, dict[str, float]]:
        from mlerl.bench import reference_scores
        from mlerl.instrument import Reference, compute_reward

        ref = Reference(*reference_scores(task, graded.baseline)) if graded.valid else None
        result = compute_reward(
            markers,
            status,
            graded.score,
            graded.valid,
            task.lower_is_better,
            self._reward_config,
            reference=ref,
        )
        return result.reward, {k: float(v) for k, v in result.parts.items()}

    def clean(self, text: str, nonce: str | None) -> str:
        from mlerl.instrument import clean_output

        return clean_output(text, nonce)

    def close(self) -> None:
        self._graders.close()
