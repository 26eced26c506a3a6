"""Adapters from the actor to mlerl.instrument and mlerl.bench, as one small bundle of functions.

The actor calls only these five functions (plus ``close`` when it stops), so tests swap in
fakes and the other packages' APIs are named in exactly one place. :func:`real_pipeline`
wires the real ones:

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
from collections.abc import Awaitable, Callable
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


@dataclass(frozen=True)
class Pipeline:
    prepare: Callable[[str], Awaitable[Prepared]]
    scanner: Callable[[str | None], Scanner]
    grade: Callable[[TaskSpec, Path], Graded]
    """(task, submission path) -> Graded; blocking, the actor runs it in a thread."""
    reward: Callable[[list[str], ExecStatus, Graded, TaskSpec], tuple[float | None, dict[str, float]]]
    """(markers, status, graded, task) -> (reward or None, parts)."""
    clean: Callable[[str, str | None], str]
    close: Callable[[], None] = lambda: None
    """Release what the adapters hold (the grading processes); idempotent."""


def real_pipeline(config: ActorsConfig | None = None, instrument: InstrumentConfig | None = None,
                  lm_instrumenter: LMInstrumenter | None = None) -> Pipeline:
    """The real adapters for an actor with ``config`` (an ``ActorsConfig``; default one) and the
    run's ``instrument`` section (an ``mlerl.instrument.InstrumentConfig``: marker mode and
    reward constants; default one). ``lm_instrumenter`` (an ``LMInstrumenter``) switches to LM
    mode. Every setting is read from those two configs, its one owner.

    One grading process per execution slot (``admission.max_in_flight``: each holds its slot
    while grading), started here, when the run starts, so that no grade pays a child's
    interpreter start and pandas import, and replaced as soon as one retires or dies;
    ``Pipeline.close`` ends them. The grade timeout is ``grade_timeout_s``.
    """
    from mlerl.bench import GraderPool, reference_scores
    from mlerl.instrument import (
        InstrumentConfig, MarkerScanner, Reference, clean_output, compute_reward, instrument_ast, prepare_run,
    )

    from mlerl.actors._config import ActorsConfig

    config = config or ActorsConfig()
    instrument = instrument or InstrumentConfig()
    markers, reward_config = instrument.markers.value, instrument.reward

    async def prepare(code: str) -> Prepared:
        try:
            if lm_instrumenter is not None:
                instrumented = (await lm_instrumenter.instrument(code)).code
            else:
                instrumented = instrument_ast(code)
        except (SyntaxError, ValueError, RecursionError) as exc:
            log.warning("instrumentation failed (%s); running the program uninstrumented", exc)
            return Prepared(code, None)
        run = prepare_run(instrumented, markers)
        return Prepared(run.program, run.nonce)

    graders = GraderPool(size=config.admission.max_in_flight, timeout_s=config.grade_timeout_s)
    graders.warm()

    def grade(task: TaskSpec, path: Path) -> Graded:
        report = graders.grade(task, path)
        return Graded(report.public_score, bool(report.valid_submission), report.error,
                      report.private_score, report.baseline_score)

    def reward(marks: list[str], status: ExecStatus, graded: Graded,
               task: TaskSpec) -> tuple[float | None, dict[str, float]]:
        ref = Reference(*reference_scores(task, graded.baseline)) if graded.valid else None
        result = compute_reward(marks, status, graded.score, graded.valid, task.lower_is_better,
                                reward_config, reference=ref)
        parts = {k: float(v) for k, v in result.parts.items()}
        return result.reward, parts

    return Pipeline(
        prepare=prepare,
        scanner=lambda nonce: MarkerScanner(nonce),
        grade=grade,
        reward=reward,
        clean=clean_output,
        close=graders.close,
    )
