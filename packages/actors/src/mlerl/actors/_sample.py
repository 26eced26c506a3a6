"""An action as it goes through the actor, and the :class:`mlerl.protocol.Sample` it becomes.

Guarantees of :func:`make_sample`: every field is filled (ids, behaviour log-probs, version,
sampling parameters), the timestamps are ordered (sampled <= exec started <= exec finished <=
graded; raised to the previous one where the sandbox's clock was behind the actor's),
``duration_s`` is the execution's (0 when nothing ran) and ``generation_s`` the generation's;
both are monotonic measures, so Δt = ``generation_s + duration_s`` is never clamped.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlerl.actors._execute import Executed
from mlerl.actors._improve import Solution
from mlerl.actors._parse import ParsedResponse
from mlerl.protocol import ChatMessage, Completion, PromptKind, Sample, SamplingParams


@dataclass
class Action:
    """One admitted action: planned, then generated (completion, version, parse)."""

    task_id: str
    kind: PromptKind
    parent: Solution | None
    messages: list[ChatMessage]
    completion: Completion | None = None
    parsed: ParsedResponse | None = None
    version: int = -1
    t_sampled: float = 0.0
    params: SamplingParams | None = None
    generation_s: float = 0.0
    """Monotonic seconds of the ``engine.generate`` call that produced it (its batch's)."""


def _not_before(t: float | None, earlier: float) -> float | None:
    return None if t is None else max(t, earlier)


def make_sample(
    actor_id: str,
    seq: int,
    action: Action,
    out: Executed,
    reward: float,
    parts: dict[str, float],
    submission: bytes | None = None,
) -> Sample:
    c, parsed, p = action.completion, action.parsed, action.params
    assert c is not None and parsed is not None and p is not None
    # Ordered against clock skew between the actor and the sandbox.
    t0 = action.t_sampled
    t1 = _not_before(out.t_started, t0)
    t2 = _not_before(out.t_finished, t1 or t0)
    t3 = _not_before(out.t_graded, t2 or t0)
    return Sample(
        sample_id=f"{actor_id}:{seq}",
        actor_id=actor_id,
        seq=seq,
        task_id=action.task_id,
        prompt_kind=action.kind,
        parent_id=action.parent.sample_id if action.parent else None,
        parent_reward=float(action.parent.reward) if action.parent else None,
        prompt_ids=list(c.prompt_ids),
        response_ids=list(c.token_ids),
        behaviour_logprobs=list(c.logprobs),
        policy_version=action.version,
        temperature=p.temperature,
        top_p=p.top_p,
        top_k=p.top_k,
        t_sampled=t0,
        t_exec_started=t1,
        t_exec_finished=t2,
        t_graded=t3,
        duration_s=out.duration_s,
        generation_s=action.generation_s,
        parse_status=parsed.status,
        exec_status=out.status,
        markers=list(out.markers),
        score=out.graded.score,
        private_score=out.graded.private_score,
        valid_submission=out.graded.valid,
        reward=float(reward),
        reward_parts=parts,
        plan=parsed.plan,
        code=parsed.code,
        output_tail=out.output,
        submission=submission,
    )


def solution(sample_id: str, action: Action, out: Executed, reward: float) -> Solution:
    """What the self-improvement buffer keeps of a finished action."""
    parsed = action.parsed
    assert parsed is not None
    return Solution(
        sample_id,
        action.task_id,
        parsed.plan,
        parsed.code,
        out.output,
        reward,
        out.status,
        parsed.status,
        out.graded.score,
        action.version,
        frozenset(out.markers),
        action.parent.sample_id if action.parent else None,
    )
