"""An AIDE-style baseline agent over any :class:`InferenceEngine` (MLE-bench's best scaffold).

Greedy tree search, as AIDE does it (notes/mlebench.md): draft root solutions until
``num_drafts`` exist; then each step, with probability ``debug_prob`` debug a random buggy leaf
whose debug chain is shorter than ``max_debug_depth``, otherwise improve the best working node.
Every step is one evaluation of one response (plan + one code block, parsed by
:func:`parse_response`). A response with no runnable program is sampled again, with a fresh
seed, up to ``parse_attempts`` LLM calls in all (AIDE's ``plan_and_code_query`` retries 3
times); when every attempt fails the step becomes a buggy node that ran nothing (it is still
one step). The best node is the working node with the best metric.

What the search optimises is the caller's ``evaluate``: AIDE itself reads a hold-out metric that
the program prints; :func:`mlerl.actors._evaluate.evaluate_aide` passes one that runs the
program the way an RL action runs and grades its submission (the test score the RL reward
uses). Each step samples with its own seed drawn from ``seed``, so drafts of the same prompt
differ. Dropped from AIDE: its LLM-based output review and its memory summary of earlier nodes
(each prompt shows only the node being revised). The ``aideml`` package is not used (it pins
old numpy/pandas/scikit-learn).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mlerl.actors._parse import parse_response
from mlerl.actors._prompts import (
    EDIT_FORMAT,
    FORMAT,
    SYSTEM,
    PromptConfig,
    clip_head,
    clip_tail,
    improve_prompt,
    scratch_prompt,
)
from mlerl.protocol import ChatMessage, InferenceEngine, ParseStatus, SamplingParams, check

if TYPE_CHECKING:
    from mlerl.bench import TaskSpec


@dataclass(frozen=True)
class Evaluation:
    buggy: bool
    """The program failed or produced no valid submission."""
    metric: float | None
    """The number the search maximises or minimises (None when buggy)."""
    output: str
    """Terminal output shown when the node is debugged or improved."""
    duration_s: float = 0.0
    """The program's execution time (0 when nothing ran)."""
    status: str = ""
    """How the execution ended (an ``ExecStatus`` value; ``not_run`` when nothing ran)."""
    private: float | None = None
    """The private leaderboard's score, for reports only: the search never reads it."""


@dataclass
class AideConfig:
    steps: int = 20
    """LLM calls (and evaluations) in total."""
    num_drafts: int = 5
    """Root solutions drafted before any debugging or improving (AIDE: 5)."""
    debug_prob: float = 0.5
    """Probability of debugging a buggy leaf when one is debuggable (AIDE: 0.5)."""
    max_debug_depth: int = 3
    """A node reached by this many consecutive debug steps is not debugged again (AIDE: 3)."""
    parse_attempts: int = 3
    """LLM calls per step at most: a response with no runnable program is sampled again
    (AIDE: 3); 1 runs or records the first response whatever it holds."""

    def __post_init__(self) -> None:
        check(self.steps >= 1, "steps", "must be >= 1")
        check(self.num_drafts >= 1, "num_drafts", "must be >= 1")
        check(0 <= self.debug_prob <= 1, "debug_prob", "must be in [0, 1]")
        check(self.max_debug_depth >= 0, "max_debug_depth", "must be >= 0")
        check(self.parse_attempts >= 1, "parse_attempts", "must be >= 1")


@dataclass
class Node:
    id: int
    action: str
    """``draft``, ``debug`` or ``improve``."""
    parent: int | None
    plan: str
    code: str
    evaluation: Evaluation
    debug_depth: int = 0
    children: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    """Wall-clock seconds of the step: generation, parsing, execution and grading."""
    attempts: int = 1
    """LLM calls the step took (more than one when a response held no runnable program)."""


def debug_prompt(task: TaskSpec, node: Node, config: PromptConfig) -> list[ChatMessage]:
    previous = clip_head(f"{node.plan}\n\n```python\n{node.code.rstrip()}\n```", config.code_chars)
    user = (
        "Your previous solution had a bug or produced no valid submission. Fix it. "
        f"{EDIT_FORMAT if config.improve_format == 'edit' else FORMAT} The data is in `./input/`; "
        "write `./submission.csv`.\n\n"
        f"Task: {clip_head(task.description.strip(), config.description_chars)}\n\n"
        f"Previous solution:\n{previous}\n\n"
        "Terminal "
        f"output:\n```\n{clip_tail(node.evaluation.output.strip(), config.output_chars)}\n```\n"
    )
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=user)]


def best_node(nodes: list[Node], lower_is_better: bool) -> Node | None:
    good = [n for n in nodes if not n.evaluation.buggy and n.evaluation.metric is not None]
    if not good:
        return None
    sign = 1.0 if lower_is_better else -1.0
    return min(good, key=lambda n: sign * (n.evaluation.metric or 0.0))  # every metric is set here


def next_step(
    nodes: list[Node], config: AideConfig, lower_is_better: bool, rng: random.Random
) -> tuple[str, Node | None]:
    """AIDE's search policy: (action, node to revise). Pure given ``rng``."""
    if sum(n.action == "draft" for n in nodes) < config.num_drafts:
        return "draft", None
    debuggable = [
        n
        for n in nodes
        if n.evaluation.buggy and not n.children and n.debug_depth < config.max_debug_depth
    ]
    if debuggable and rng.random() < config.debug_prob:
        return "debug", rng.choice(debuggable)
    best = best_node(nodes, lower_is_better)
    return ("improve", best) if best is not None else ("draft", None)


async def run_aide(
    engine: InferenceEngine,
    task: TaskSpec,
    evaluate: Callable[[str], Awaitable[Evaluation]],
    config: AideConfig | None = None,
    *,
    params: SamplingParams | None = None,
    prompts: PromptConfig | None = None,
    seed: int = 0,
) -> list[Node]:
    """Run the search on ``task`` (needs ``description``, ``public_dir``, ``lower_is_better``).

    ``params.seed`` is replaced per LLM call by a seed drawn from ``seed`` (reproducible, and two
    drafts of the same prompt are different samples; with ``parse_attempts=1`` the seeds are
    one per step)."""
    config, prompts = config or AideConfig(), prompts or PromptConfig()
    params = params or SamplingParams()
    rng = random.Random(seed)
    sampling_rng = random.Random(f"{seed}:sampling")
    nodes: list[Node] = []
    for step in range(config.steps):
        t0 = time.monotonic()
        action, target = next_step(nodes, config, task.lower_is_better, rng)
        if target is None:
            messages = scratch_prompt(task, prompts)
        elif action == "debug":
            messages = debug_prompt(task, target, prompts)
        else:
            e = target.evaluation
            messages = improve_prompt(task, target.plan, target.code, e.output, prompts)
        edits_of = target.code if target is not None and prompts.improve_format == "edit" else None
        attempts = 0
        while True:  # AIDE's plan_and_code_query: sample again while nothing runnable came back
            attempts += 1
            step_params = SamplingParams(
                max_new_tokens=params.max_new_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k,
                seed=sampling_rng.randrange(2**31),
            )
            (completion,) = await engine.generate([messages], step_params)
            parsed = parse_response(completion.text, completion.finish_reason, edits_of)
            if parsed.status is ParseStatus.OK or attempts == config.parse_attempts:
                break
        if parsed.status is ParseStatus.OK:
            evaluation = await evaluate(parsed.code)
        else:
            evaluation = Evaluation(
                True, None, f"the response was not runnable: {parsed.detail}", status="not_run"
            )
        node = Node(
            id=step,
            action=action,
            parent=target.id if target else None,
            plan=parsed.plan,
            code=parsed.code,
            evaluation=evaluation,
            debug_depth=target.debug_depth + 1 if (target and action == "debug") else 0,
            wall_s=time.monotonic() - t0,
            attempts=attempts,
        )
        if target is not None:
            target.children.append(node.id)
        nodes.append(node)
    return nodes
