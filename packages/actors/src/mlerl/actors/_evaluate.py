"""Best-of-K evaluation of a fixed policy with the paper's test-time protocol.

The paper (section 3.3) generates solutions from scratch and runs the agent again to improve
them, then takes the best of both. :func:`evaluate` runs the same actor loop as training
(same prompts, parser, instrumentation, sandbox, grader and reward) with no learner: the
policy never changes, ``k`` samples are drawn per task, a fraction ``improve_prob`` of them
improving earlier ones once any exist, and each task's samples are summarised by
:func:`summarise` (best and mean score, valid fraction). Nothing is sent over the network: a
local collector stands in for the learner.

Public and private leaderboards (mlerl.bench): every selection (the best of K, the best so far,
AIDE's best node) reads the public score; the summaries report the selected submission's
private score as ``best_score`` (``mean_score``: the mean private score), with the public one
(``best_public``, ``mean_public``) and ``best_gap`` = private - public beside it. A sample
without a private score (a grader that predates the split) reports its public one.

:func:`evaluate_aide` is the baseline at an equal number of program executions: AIDE's tree
search (:mod:`._aide`) driven by the same fixed policy, ``k`` steps per task, every program run
by :func:`sandbox_evaluator` exactly as an RL action runs (same instrumentation, sandbox,
limits and grader), summarised with the same keys.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlerl.actors._actor import Actor
from mlerl.actors._aide import AideConfig, Evaluation, Node, run_aide
from mlerl.actors._config import ActorsConfig
from mlerl.actors._execute import execute
from mlerl.actors._pipeline import Pipeline
from mlerl.actors._state import ActorState
from mlerl.protocol import ExecStatus, InferenceEngine, Sample
from mlerl.sandbox import Sandbox

if TYPE_CHECKING:  # mlerl.bench imports pandas: only the type is needed here
    from mlerl.bench import TaskSpec

log = logging.getLogger(__name__)


class _Collector:
    """Receives every sample at once and acks it (the actor's view of a learner that always has
    room: it never holds an unacked sample, so the actor never waits for it)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.acked_seq = -1
        self.learner_full = False
        self.unacked = 0

    async def send(self, sample: Sample) -> None:
        if sample.seq > self.acked_seq:
            self.samples.append(sample)
            self.acked_seq = sample.seq

    async def changed(self) -> None:
        await asyncio.Event().wait()  # nothing the actor waits for ever changes


def _valid_score(score: float | None, valid: bool) -> float | None:
    return score if valid and score is not None and not math.isnan(score) else None


def best_so_far(
    scores: list[float | None], lower_is_better: bool, reported: list[float | None] | None = None
) -> list[float | None]:
    """The best score after each execution (None until the first valid one; None = invalid).
    With ``reported`` (e.g. private scores, one per execution), the best is still chosen on
    ``scores`` (public) and its ``reported`` value is returned."""
    out: list[float | None] = []
    best: float | None = None
    shown: float | None = None
    for i, s in enumerate(scores):
        if s is not None and (best is None or (s < best if lower_is_better else s > best)):
            best = s
            shown = s if reported is None or reported[i] is None else reported[i]
        out.append(shown)
    return out


def _private(s: Sample) -> float | None:
    """A valid sample's private score (its public one when it has none)."""
    if _valid_score(s.score, s.valid_submission) is None:
        return None
    p = s.private_score
    return s.score if p is None or math.isnan(p) else p


def _leaderboards(
    public: list[float | None], private: list[float | None], lower: bool
) -> dict[str, Any]:
    """Best (chosen on public) and mean, private and public, over one task's executions."""
    pairs = [(p, q) for p, q in zip(public, private, strict=True) if p is not None]
    best = best_so_far(public, lower, private)
    best_public = best_so_far(public, lower)
    top = best[-1] if best else None
    top_public = best_public[-1] if best_public else None
    return {
        "best_score": top,
        "best_public": top_public,
        "best_gap": None if top is None or top_public is None else top - top_public,
        "mean_score": sum(q for _, q in pairs if q is not None) / len(pairs) if pairs else None,
        "mean_public": sum(p for p, _ in pairs) / len(pairs) if pairs else None,
        "best_vs_executions": best,
    }


def _finished(s: Sample) -> float:
    return next(t for t in (s.t_graded, s.t_exec_finished, s.t_sampled) if t is not None)


def _best_index(public: list[float | None], lower_is_better: bool) -> int | None:
    """The position of the execution a best-of-K selects: the first to reach the best public
    score (a later tie does not displace it), None without a valid one."""
    best = best_so_far(public, lower_is_better)
    if not best or best[-1] is None:
        return None
    return next(i for i, b in enumerate(best) if b == best[-1])


def _solution(
    plan: str, code: str, output: str, public: float | None, private: float | None, execution: int
) -> dict[str, Any]:
    """The selected solution as a summary reports it (``execution``: its 1-based position in
    the order the executions finished), so a baseline's best program can be read and rerun as
    a run's ``best/<task>/`` can."""
    return {
        "execution": execution,
        "public_score": public,
        "private_score": private,
        "plan": plan,
        "program": code,
        "output_tail": output,
    }


def summarise(
    samples: list[Sample], lower_is_better: bool, t0: float | None = None
) -> dict[str, Any]:
    """Best-of-K and mean over the K samples of one task (invalid samples have no score).

    Every sample is one of the K, a ``not_run`` one (no program in the response) included.
    The best is chosen on the public score and reported on the private one (see the module
    docstring). ``best_vs_executions`` is the best (private) score after each sample in the
    order they finished; with ``t0`` (when the evaluation began), ``elapsed_s`` is when each
    finished. ``best_kind`` is the prompt kind of the selected sample and
    ``valid_frac_by_kind`` each kind's valid fraction (both kinds share the same K).
    ``best_solution`` is the selected sample itself (plan, program, terminal output, both
    scores, its kind and position), None without a valid one."""
    ordered = sorted(samples, key=_finished)
    public = [_valid_score(s.score, s.valid_submission) for s in ordered]
    private = [_private(s) for s in ordered]
    boards = _leaderboards(public, private, lower_is_better)
    n_valid = sum(p is not None for p in public)
    top = _best_index(public, lower_is_better)
    chosen = ordered[top] if top is not None else None
    return {
        "k": len(samples),
        **{k: v for k, v in boards.items() if k != "best_vs_executions"},
        "valid_frac": n_valid / len(samples) if samples else 0.0,
        "mean_reward": sum(s.reward for s in samples) / len(samples) if samples else None,
        "mean_duration_s": sum(s.duration_s for s in samples) / len(samples) if samples else None,
        "improve_frac": sum(s.prompt_kind.value == "improve" for s in samples) / len(samples)
        if samples
        else 0.0,
        "best_kind": chosen.prompt_kind.value if chosen is not None else None,
        "valid_frac_by_kind": {
            kind: sum(
                p is not None
                for s, p in zip(ordered, public, strict=True)
                if s.prompt_kind.value == kind
            )
            / max(1, sum(s.prompt_kind.value == kind for s in ordered))
            for kind in ("scratch", "improve")
        },
        "lower_is_better": lower_is_better,
        "best_vs_executions": boards["best_vs_executions"],
        "elapsed_s": [max(_finished(s) - t0, 0.0) for s in ordered] if t0 is not None else None,
        "best_solution": None
        if top is None or chosen is None
        else {
            **_solution(
                chosen.plan,
                chosen.code,
                chosen.output_tail,
                public[top],
                private[top],
                top + 1,
            ),
            "kind": chosen.prompt_kind.value,
        },
    }


async def evaluate(
    config: ActorsConfig,
    tasks: Mapping[str, TaskSpec],
    *,
    k: int,
    engine: InferenceEngine,
    sandbox: Sandbox,
    pipeline: Pipeline,
    seed: int = 0,
    state_dir: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Draw ``k`` samples per task from the fixed ``engine``; return each task's summary. Each
    execution runs under the sandbox's own limits and the task's time limit."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mlerl-eval-") as tmp:
        root = Path(state_dir) if state_dir else Path(tmp)
        for task_id, task in tasks.items():
            collector = _Collector()
            task_config = dataclasses.replace(config, max_samples=k)
            actor = Actor(
                f"eval-{task_id}",
                task_config,
                engine=engine,
                sandbox=sandbox,
                sender=collector,
                tasks={task_id: task},
                pipeline=pipeline,
                state=ActorState(root / task_id),
                seed=seed,
            )
            t0 = time.time()
            await actor.run()
            results[task_id] = summarise(collector.samples[:k], bool(task.lower_is_better), t0)
    return results


def sandbox_evaluator(
    config: ActorsConfig,
    task_id: str,
    task: TaskSpec,
    *,
    sandbox: Sandbox,
    pipeline: Pipeline,
) -> Callable[[str], Awaitable[Evaluation]]:
    """``evaluate(code) -> Evaluation`` for :func:`run_aide`: the program runs exactly as an RL
    action's does (the actor's own execution path, :func:`._execute.execute`: instrumentation by
    ``pipeline.prepare``, the
    task's public data and time limit under the sandbox's limits, ``sandbox.run`` with INFRA_ERROR
    retries, the
    submission graded outside the sandbox by ``pipeline.grade``, stdout + stderr cleaned by
    ``pipeline.clean`` and cut to ``output_tail_chars`` as the terminal output).

    The search's metric is the graded test score, so AIDE gets the same feedback as the RL
    reward (AIDE proper reads a hold-out metric that the program prints; our programs print
    none reliably). ``buggy`` = no valid submission. An execution that still fails for the
    harness's reasons after the retries is buggy with status ``infra_error`` (the RL side
    drops such an action; here it still counts as one of the K)."""

    async def evaluate_code(code: str) -> Evaluation:
        try:
            outcome = await execute(
                code,
                task,
                sandbox=sandbox,
                pipeline=pipeline,
                retries=config.infra_retries,
                tail_chars=config.output_tail_chars,
                clock=time.time,
                who=f"aide {task_id}",
            )
        except Exception:
            log.exception("aide %s: execution pipeline failed", task_id)
            outcome = None
        if outcome is None or outcome.status is ExecStatus.INFRA_ERROR:
            return Evaluation(
                True,
                None,
                "The program could not be run (the sandbox failed).",
                status=ExecStatus.INFRA_ERROR.value,
            )
        score = _valid_score(outcome.graded.score, outcome.graded.valid)
        private = outcome.graded.private_score if score is not None else None
        return Evaluation(
            score is None,
            score,
            outcome.output,
            outcome.duration_s,
            outcome.status.value,
            private=score if private is None or math.isnan(private) else private,
        )

    return evaluate_code


def summarise_aide(nodes: list[Node], lower_is_better: bool) -> dict[str, Any]:
    """:func:`summarise`'s keys for one AIDE search (its best node chosen on the public score,
    reported on the private one): each node (step) is one of the K
    executions, a node whose response held no program (``not_run``: it cost an LLM call and
    ran nothing, duration 0) included, as a ``not_run`` sample is on the RL side. Plus the
    best score after each step (``best_vs_executions``), each step's wall-clock seconds
    (``wall_s``: generation, execution, grading; the steps run one after the other, so
    ``elapsed_s`` is their running sum), the LLM calls in all (``llm_calls``: a step whose
    response held no program samples again, up to ``AideConfig.parse_attempts``), the count of
    each action and status, and the best node itself (``best_solution``, as :func:`summarise`
    gives it, with its ``action``)."""
    scores = [n.evaluation.metric if not n.evaluation.buggy else None for n in nodes]
    private = [n.evaluation.private if not n.evaluation.buggy else None for n in nodes]
    boards = _leaderboards(scores, private, lower_is_better)
    valid = [s for s in scores if s is not None]
    top = _best_index(scores, lower_is_better)
    elapsed, total = [], 0.0
    for n in nodes:
        total += n.wall_s
        elapsed.append(total)
    count = lambda xs: {x: xs.count(x) for x in sorted(set(xs))}  # noqa: E731 - a one-line local helper reads best as a lambda
    return {
        "k": len(nodes),
        **{k: v for k, v in boards.items() if k != "best_vs_executions"},
        "valid_frac": len(valid) / len(nodes) if nodes else 0.0,
        "mean_duration_s": sum(n.evaluation.duration_s for n in nodes) / len(nodes)
        if nodes
        else None,
        "lower_is_better": lower_is_better,
        "best_vs_executions": boards["best_vs_executions"],
        "wall_s": [n.wall_s for n in nodes],
        "elapsed_s": elapsed,
        "llm_calls": sum(n.attempts for n in nodes),
        "actions": count([n.action for n in nodes]),
        "statuses": count([n.evaluation.status for n in nodes]),
        "best_solution": None
        if top is None
        else {
            **_solution(
                nodes[top].plan,
                nodes[top].code,
                nodes[top].evaluation.output,
                scores[top],
                private[top],
                top + 1,
            ),
            "action": nodes[top].action,
        },
    }


async def evaluate_aide(
    config: ActorsConfig,
    tasks: Mapping[str, TaskSpec],
    *,
    k: int,
    engine: InferenceEngine,
    sandbox: Sandbox,
    pipeline: Pipeline,
    seed: int = 0,
    aide: AideConfig | None = None,
) -> dict[str, dict[str, Any]]:
    """AIDE driven by the fixed ``engine``, ``k`` steps (= program executions) per task, one
    task after the other; return each task's :func:`summarise_aide`.

    Same prompts (``config.prompts``) and sampling settings (``config.sampling``) as
    :func:`evaluate`, same seed; ``aide`` sets the search (its ``steps`` is replaced by ``k``)."""
    aide = dataclasses.replace(aide or AideConfig(), steps=k)
    results: dict[str, dict[str, Any]] = {}
    for task_id, task in tasks.items():
        evaluate_code = sandbox_evaluator(config, task_id, task, sandbox=sandbox, pipeline=pipeline)
        nodes = await run_aide(
            engine,
            task,
            evaluate_code,
            aide,
            params=config.sampling(),
            prompts=config.prompts,
            seed=seed,
        )
        results[task_id] = summarise_aide(nodes, bool(task.lower_is_better))
    return results
